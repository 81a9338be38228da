/**
 * Internal helpers shared by the certificate builders (not part of the public surface of
 * `certs/`): key generation, serial numbers, validity windows and subject alternative names.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

/** Default backdating of `notBefore`, so a peer whose clock is a little behind accepts the cert. */
export const BACKDATE_MS = 5 * 60 * 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A fresh RSA-2048 key pair as forge objects. Node's native generator is used because forge's
 * pure-JS one takes seconds; forge can only sign with RSA, hence RSA.
 */
export function generateRsaKeyPair(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey } {
  const { privateKey: pem } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  const privateKey = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  const publicKey = forge.pki.setRsaPublicKey(privateKey.n, privateKey.e);
  return { privateKey, publicKey };
}

/**
 * A random positive 128-bit serial number, hex. The first byte is kept in 0x01..0x7f: a high bit
 * would make the DER integer negative, and a leading zero byte would be a non-minimal encoding,
 * both of which Go's x509 parser (kube-apiserver) rejects.
 */
export function randomSerialHex(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes.readUInt8(0) & 0x7f || 0x01;
  return bytes.toString('hex');
}

/** Sets `notBefore` (backdated) and `notAfter` (`validityDays` after `nowMs`). */
export function setValidity(cert: forge.pki.Certificate, nowMs: number, validityDays: number): void {
  if (!(validityDays > 0)) throw new RangeError(`validityDays must be positive, got ${validityDays}`);
  cert.validity.notBefore = new Date(nowMs - BACKDATE_MS);
  cert.validity.notAfter = new Date(nowMs + validityDays * DAY_MS);
}

/**
 * The part every leaf certificate of ours shares: a fresh key pair, a random serial, the
 * validity window and the subject (CN only). The caller sets issuer and extensions, and signs.
 */
export function newLeafCertificate(opts: { commonName: string; nowMs: number; validityDays: number }): { cert: forge.pki.Certificate; privateKey: forge.pki.rsa.PrivateKey } {
  const { privateKey, publicKey } = generateRsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = randomSerialHex();
  setValidity(cert, opts.nowMs, opts.validityDays);
  cert.setSubject([{ name: 'commonName', value: opts.commonName }]);
  return { cert, privateKey };
}

/** forge `altNames` entries: DNS names (type 2) then IP addresses (type 7). */
export function altNames(dnsNames: readonly string[], ipAddresses: readonly string[]): Array<{ type: number; value?: string; ip?: string }> {
  for (const ip of ipAddresses) {
    if (isIP(ip) === 0) throw new TypeError(`not an IP address: ${JSON.stringify(ip)}`);
  }
  return [...dnsNames.map((value) => ({ type: 2, value })), ...ipAddresses.map((ip) => ({ type: 7, ip }))];
}

/** The canonical text form of an IP address (IPv6 compressed, lower case), for comparisons. */
export function normalizeIp(ip: string): string {
  // Present in forge's util but missing from its type declarations.
  const util = forge.util as unknown as { bytesFromIP(ip: string): string | null; bytesToIP(bytes: string): string | null };
  const bytes = util.bytesFromIP(ip);
  if (!bytes) return ip;
  return util.bytesToIP(bytes) ?? ip;
}

/** Signs with SHA-256 (SHA-1 signatures are refused by Go since 1.18). */
export function sha256(): forge.md.MessageDigest {
  return forge.md.sha256.create();
}
