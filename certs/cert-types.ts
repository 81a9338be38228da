/**
 * Types shared by the certificate helpers. `certs/` imports nothing else of the project, so the
 * clock it needs is declared here structurally; `provider/core/clock.ts`'s `Clock` (and its
 * `FakeClock`) fit it as they are.
 */

/** A PEM certificate (or chain, leaf first) and its PEM private key. */
export interface CertKeyPair {
  certPem: string;
  keyPem: string;
}

/** The time source the rotator needs: milliseconds since the epoch and cancellable timers. */
export interface CertClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  // Method syntax on purpose: parameters of methods are checked bivariantly, so a clock whose
  // `clearTimeout` takes its own timer type is still assignable.
  clearTimeout(timer: unknown): void;
}
