import type { CertificateInfo } from './read-certificate.js';

/** When to renew a certificate: a fixed margin before expiry, else a fraction of its lifetime. */
export interface RenewalPolicy {
  /** Renew this many milliseconds before `notAfter`. Wins over `renewAtFraction` when set. */
  renewBeforeMs?: number;
  /** Renew once this fraction of the lifetime (`notBefore`..`notAfter`) has elapsed; default 2/3. */
  renewAtFraction?: number;
}

/**
 * The instant (milliseconds since the epoch) at which a certificate is due for renewal. Pure.
 * `CertRotator` schedules on it and `WebhookCertificates` regenerates once `now` reaches it, so
 * both agree on "near expiry".
 */
export function renewalTimeMs(cert: Pick<CertificateInfo, 'notBefore' | 'notAfter'>, policy: RenewalPolicy = {}): number {
  const notBefore = cert.notBefore.getTime();
  const notAfter = cert.notAfter.getTime();
  if (policy.renewBeforeMs !== undefined) return notAfter - policy.renewBeforeMs;
  const fraction = policy.renewAtFraction ?? 2 / 3;
  if (!(fraction > 0 && fraction <= 1)) throw new RangeError(`renewAtFraction must be in (0, 1], got ${fraction}`);
  return notBefore + Math.floor((notAfter - notBefore) * fraction);
}
