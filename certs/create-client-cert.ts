import forge from 'node-forge';
import type { CertKeyPair } from './cert-types.js';
import { newLeafCertificate, sha256 } from './forge-helpers.js';

export interface CreateClientCertOptions {
  /** The signing CA (from `createCA`). */
  ca: CertKeyPair;
  /** The identity the server checks, e.g. `admiralty-proxy-scheduler`. */
  commonName: string;
  /** Lifetime from `now`; default 365. */
  validityDays?: number;
  /** Milliseconds since the epoch; default the current time. */
  now?: number;
}

/**
 * Creates a TLS client certificate signed by `ca`: RSA-2048, SHA-256, extended key usage
 * `clientAuth` only (so it cannot serve, and a serving cert of the same CA cannot stand in for
 * it: OpenSSL checks the purpose of a client's chain), no SAN. No I/O.
 *
 * The provider issues one to the proxy scheduler, which presents it to the extender.
 */
export function createClientCert(opts: CreateClientCertOptions): CertKeyPair {
  const caCert = forge.pki.certificateFromPem(opts.ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(opts.ca.keyPem) as forge.pki.rsa.PrivateKey;
  const { cert, privateKey } = newLeafCertificate({ commonName: opts.commonName, nowMs: opts.now ?? Date.now(), validityDays: opts.validityDays ?? 365 });
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, sha256());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(privateKey) };
}
