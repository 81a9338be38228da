import forge from 'node-forge';
import { normalizeIp } from './forge-helpers.js';

/** The facts of a certificate that rotation and SAN checks need. */
export interface CertificateInfo {
  notBefore: Date;
  notAfter: Date;
  dnsNames: string[];
  /** Canonical text form (IPv6 compressed, lower case). */
  ipAddresses: string[];
  subjectCommonName: string | undefined;
  issuerCommonName: string | undefined;
  /** Lower-case hex, as encoded. */
  serialHex: string;
}

/**
 * Parses the first certificate of a PEM (a chain is read leaf first). No I/O. Throws if the
 * PEM is not an RSA certificate forge can parse.
 */
export function readCertificate(pem: string): CertificateInfo {
  const cert = forge.pki.certificateFromPem(pem);
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  const san = cert.getExtension('subjectAltName') as { altNames?: Array<{ type: number; value?: string; ip?: string }> } | null;
  for (const name of san?.altNames ?? []) {
    if (name.type === 2 && name.value !== undefined) dnsNames.push(name.value);
    if (name.type === 7 && name.ip !== undefined) ipAddresses.push(normalizeIp(name.ip));
  }
  const cn = (attrs: forge.pki.Certificate['subject']): string | undefined => {
    const v = attrs.getField('CN')?.value;
    return typeof v === 'string' ? v : undefined;
  };
  return {
    notBefore: cert.validity.notBefore,
    notAfter: cert.validity.notAfter,
    dnsNames,
    ipAddresses,
    subjectCommonName: cn(cert.subject),
    issuerCommonName: cn(cert.issuer),
    serialHex: cert.serialNumber.toLowerCase(),
  };
}

/** The canonical text form of an IP address as `readCertificate` reports it, for comparing SANs. */
export { normalizeIp } from './forge-helpers.js';
