import forge from 'node-forge';
import { altNames, generateRsaKeyPair, sha256 } from './forge-helpers.js';

export interface CreateCsrOptions {
  /** For the kubelet-serving signer: `system:node:<nodeName>`. */
  commonName: string;
  /** For the kubelet-serving signer: `system:nodes` (exactly one organization). Omitted if absent. */
  organization?: string;
  dnsNames: readonly string[];
  ipAddresses?: readonly string[];
}

/**
 * Creates a PKCS#10 certificate signing request (RSA-2048, SHA-256) with the SANs in an
 * `extensionRequest` attribute, and its new private key. No I/O.
 *
 * The kubelet API uses it for the `kubernetes.io/kubelet-serving` CSR flow: the signer refuses a
 * request without a DNS or IP SAN, so this throws `TypeError` when both lists are empty.
 * `csrPem` goes base64-encoded into `CertificateSigningRequest.spec.request`.
 */
export function createCsr(opts: CreateCsrOptions): { csrPem: string; keyPem: string } {
  const names = altNames(opts.dnsNames, opts.ipAddresses ?? []);
  if (names.length === 0) throw new TypeError('a certificate signing request needs at least one DNS name or IP address');
  const { privateKey, publicKey } = generateRsaKeyPair();
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = publicKey;
  const subject: forge.pki.CertificateField[] = [{ name: 'commonName', value: opts.commonName }];
  if (opts.organization !== undefined) subject.push({ name: 'organizationName', value: opts.organization });
  csr.setSubject(subject);
  csr.setAttributes([{ name: 'extensionRequest', extensions: [{ name: 'subjectAltName', altNames: names }] }]);
  csr.sign(privateKey, sha256());
  return { csrPem: forge.pki.certificationRequestToPem(csr), keyPem: forge.pki.privateKeyToPem(privateKey) };
}
