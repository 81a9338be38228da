import forge from 'node-forge';
import type { CertKeyPair } from './cert-types.js';
import { altNames, newLeafCertificate, sha256 } from './forge-helpers.js';

export interface CreateServingCertOptions {
  /** The signing CA (from `createCA`). */
  ca: CertKeyPair;
  commonName: string;
  /** DNS subject alternative names, e.g. `admiralty.admiralty.svc`. */
  dnsNames: readonly string[];
  /** IP subject alternative names (v4 or v6). */
  ipAddresses?: readonly string[];
  /** Lifetime from `now`; default 365. */
  validityDays?: number;
  /** Milliseconds since the epoch; default the current time. */
  now?: number;
}

/**
 * Creates a TLS server certificate signed by `ca`: RSA-2048, SHA-256, extended key usage
 * `serverAuth`, SANs from `dnsNames` and `ipAddresses` (clients such as kube-apiserver match
 * SANs only, never the common name, so at least one SAN is required). No I/O.
 *
 * Throws `TypeError` if there is no SAN or an IP address is malformed.
 */
export function createServingCert(opts: CreateServingCertOptions): CertKeyPair {
  const caCert = forge.pki.certificateFromPem(opts.ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(opts.ca.keyPem);
  return buildServingCert(opts, { cert: caCert, key: caKey });
}

/**
 * Shared by the CA-signed and self-signed variants; `issuer` undefined means self-signed.
 * @internal
 */
export function buildServingCert(
  opts: { commonName: string; dnsNames: readonly string[]; ipAddresses?: readonly string[]; validityDays?: number; now?: number },
  issuer?: { cert: forge.pki.Certificate; key: forge.pki.PrivateKey },
): CertKeyPair {
  const names = altNames(opts.dnsNames, opts.ipAddresses ?? []);
  if (names.length === 0) throw new TypeError('a serving certificate needs at least one DNS name or IP address');
  const { cert, privateKey } = newLeafCertificate({ commonName: opts.commonName, nowMs: opts.now ?? Date.now(), validityDays: opts.validityDays ?? 365 });
  cert.setIssuer(issuer ? issuer.cert.subject.attributes : cert.subject.attributes);
  const extensions: object[] = [
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: names },
    { name: 'subjectKeyIdentifier' },
  ];
  if (issuer) {
    // Lets verifiers pick the right CA when several share a subject (CA rotation).
    extensions.push({ name: 'authorityKeyIdentifier', keyIdentifier: issuer.cert.generateSubjectKeyIdentifier().getBytes() });
  }
  cert.setExtensions(extensions);
  cert.sign((issuer?.key ?? privateKey) as forge.pki.rsa.PrivateKey, sha256());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(privateKey) };
}
