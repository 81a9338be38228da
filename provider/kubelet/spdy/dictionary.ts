/**
 * The SPDY/3 header-compression dictionary (SPDY/3 draft, section 2.6.10.1).
 *
 * Both zlib streams of a SPDY/3 connection are primed with these 1423 bytes; a peer built on
 * Go's `spdy` framer (moby/spdystream, used by client-go and the kube-apiserver) refuses header
 * blocks compressed with any other dictionary. The dictionary is a list of length-prefixed
 * words (uint32 big-endian length, then the ASCII word) followed by one run of unprefixed text;
 * it is built here from those two parts so the constant stays readable. Its Adler-32 is
 * `0xe3c6a7c2` (checked by a unit test).
 */

const PREFIXED_WORDS = [
  'options',
  'head',
  'post',
  'put',
  'delete',
  'trace',
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'accept-ranges',
  'age',
  'allow',
  'authorization',
  'cache-control',
  'connection',
  'content-base',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'etag',
  'expect',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'pragma',
  'proxy-authenticate',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'server',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'user-agent',
  'vary',
  'via',
  'warning',
  'www-authenticate',
  'method',
  'get',
  'status',
  '200 OK',
  'version',
  'HTTP/1.1',
  'url',
  'public',
  'set-cookie',
  'keep-alive',
  'origin',
];

const TRAILING_TEXT = [
  '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505',
  '203 Non-Authoritative Information',
  '204 No Content',
  '301 Moved Permanently',
  '400 Bad Request',
  '401 Unauthorized',
  '403 Forbidden',
  '404 Not Found',
  '500 Internal Server Error',
  '501 Not Implemented',
  '503 Service Unavailable',
  'Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ',
  'Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT',
  'chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,',
  'text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch',
  'charset=utf-8charset=iso-8859-1,utf-,*,enq=0.',
].join('');

/**
 * Returns a fresh copy of the SPDY/3 header dictionary (1423 bytes). Called once per zlib
 * stream by the header codec; a copy so no caller can corrupt a shared buffer.
 */
export function spdyHeaderDictionary(): Buffer {
  const parts: Buffer[] = [];
  for (const word of PREFIXED_WORDS) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(word.length, 0);
    parts.push(len, Buffer.from(word, 'latin1'));
  }
  parts.push(Buffer.from(TRAILING_TEXT, 'latin1'));
  return Buffer.concat(parts);
}
