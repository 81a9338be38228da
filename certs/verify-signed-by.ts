import { X509Certificate } from 'node:crypto';

/**
 * Whether `certPem` (its first certificate) was signed by the key of the certificate in `caPem`
 * and names it as issuer (issuer name = CA subject). Validity dates and key usages are not
 * checked (so a self-signed leaf verifies against itself; callers compare dates with their own
 * clock). Never throws: unparsable input yields `false`.
 */
export function verifySignedBy(certPem: string, caPem: string): boolean {
  try {
    const cert = new X509Certificate(certPem);
    const ca = new X509Certificate(caPem);
    return cert.issuer === ca.subject && cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}
