import type { CertKeyPair } from './cert-types.js';
import { buildServingCert } from './create-serving-cert.js';

export interface CreateSelfSignedServingCertOptions {
  commonName: string;
  dnsNames: readonly string[];
  ipAddresses?: readonly string[];
  /** Lifetime from `now`; default 365. */
  validityDays?: number;
  /** Milliseconds since the epoch; default the current time. */
  now?: number;
}

/**
 * Creates a self-signed TLS server certificate (same shape as `createServingCert`, issuer =
 * subject). The kubelet API server falls back to it when the kubelet-serving CSR cannot be
 * signed: kube-apiserver accepts it unless `--kubelet-certificate-authority` is set. No I/O.
 */
export function createSelfSignedServingCert(opts: CreateSelfSignedServingCertOptions): CertKeyPair {
  return buildServingCert(opts);
}
