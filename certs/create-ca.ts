import forge from 'node-forge';
import type { CertKeyPair } from './cert-types.js';
import { generateRsaKeyPair, randomSerialHex, setValidity, sha256 } from './forge-helpers.js';

export interface CreateCaOptions {
  commonName: string;
  /** Lifetime from `now`; default 3650 (ten years: the CA is rotated rarely, serving certs often). */
  validityDays?: number;
  /** Milliseconds since the epoch; default the current time. */
  now?: number;
}

/**
 * Creates a self-signed certificate authority (RSA-2048, SHA-256, random positive serial,
 * `basicConstraints` CA critical, key usage `keyCertSign`/`cRLSign`). No I/O.
 *
 * Called by `WebhookCertificates` when its Secret holds no usable CA, and by tests.
 */
export function createCA(opts: CreateCaOptions): CertKeyPair {
  const { privateKey, publicKey } = generateRsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = randomSerialHex();
  setValidity(cert, opts.now ?? Date.now(), opts.validityDays ?? 3650);
  const subject = [{ name: 'commonName', value: opts.commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(privateKey, sha256());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(privateKey) };
}
