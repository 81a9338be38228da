import http2, { type ClientHttp2Session, type SecureClientSessionOptions } from 'node:http2';
import { once } from 'node:events';

/** An answer read whole from one HTTP/2 stream. */
export interface H2Reply {
  status: number;
  body: string;
  headers: http2.IncomingHttpHeaders;
}

/** An HTTP/2 connection to 127.0.0.1:`port`, once its settings arrived. */
export async function h2Connect(port: number, options: SecureClientSessionOptions): Promise<ClientHttp2Session> {
  const session = http2.connect(`https://127.0.0.1:${port}`, options);
  session.on('error', () => undefined);
  await once(session, 'remoteSettings');
  return session;
}

/** One call on `session`: `body` sent whole (a POST when given, else a GET). */
export function h2Request(session: ClientHttp2Session, path: string, body?: string | Buffer): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': body === undefined ? 'GET' : 'POST', ':path': path, ...(body === undefined ? {} : { 'content-type': 'application/json' }) });
    let headers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => (headers = h));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status: Number(headers[':status'] ?? 0), body: Buffer.concat(chunks).toString('utf8'), headers }));
    stream.on('error', reject);
    stream.end(body);
  });
}
