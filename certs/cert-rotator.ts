import type { CertClock, CertKeyPair } from './cert-types.js';
import { readCertificate } from './read-certificate.js';
import { renewalTimeMs, type RenewalPolicy } from './renewal-time.js';

/**
 * Longest delay handed to one timer: Node's timers overflow above 2^31-1 ms (about 24.8 days)
 * and then fire at once, so a renewal a year away is reached in several hops.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface CertRotatorOptions extends RenewalPolicy {
  /** Obtains a fresh (or still valid) certificate; may do I/O. Its first PEM certificate is read for dates. */
  issue: () => Promise<CertKeyPair>;
  /**
   * Called with every pair `issue` returned, before the next renewal is scheduled. May be async.
   * With `recheckMs` it also receives unchanged pairs, and must then do nothing.
   */
  onRotate: (pair: CertKeyPair) => void | Promise<void>;
  clock: CertClock;
  /** Called on every failed attempt (for logs/metrics); the rotator retries by itself. */
  onError?: (err: unknown, attempt: number) => void;
  /** First retry delay after a failure; doubles per consecutive failure. Default 1 s. */
  retryInitialMs?: number;
  /** Cap of the retry delay. Default 5 minutes. */
  retryMaxMs?: number;
  /**
   * Calls `issue` at least this often even when nothing is due, so that a pair another process
   * stored (a shared Secret, a CA rotation) reaches this one within that time. With it, a pair
   * that `issue` returns already due is accepted (it kept it on purpose) and looked at again one
   * recheck later. Default: only at the renewal time.
   */
  recheckMs?: number;
}

/**
 * Keeps a certificate fresh: after each issuance it schedules the next one at the certificate's
 * renewal time (`renewalTimeMs`: 2/3 of the lifetime by default, or `renewBeforeMs` before
 * expiry), retries failures with capped exponential backoff, and can be forced.
 *
 * Used by the webhook (issue = load or regenerate the Secret) and the kubelet API server (issue =
 * CSR flow or self-signed), with `onRotate` swapping the TLS context of a server (`setSecureContext`).
 * Not thread-safe across processes: `issue` itself must be idempotent.
 */
export class CertRotator {
  private timer: unknown;
  private inFlight: Promise<CertKeyPair> | undefined;
  private failures = 0;
  private stopped = false;
  private current: CertKeyPair | undefined;

  constructor(private readonly opts: CertRotatorOptions) {}

  /**
   * Starts the cycle. With `current` (a pair already being served) it only schedules the next
   * renewal (or renews at once if it is already due); without, it issues now and resolves once the
   * first pair was handed to `onRotate` (rejects if that first attempt fails; retries continue).
   */
  async start(current?: CertKeyPair): Promise<void> {
    this.stopped = false;
    if (current) {
      this.current = current;
      this.scheduleAt(this.nextCheckAt(this.renewalTimeOf(current)));
      return;
    }
    await this.rotateNow();
  }

  /**
   * Issues a certificate now (joining an attempt already running), hands it to `onRotate` and
   * schedules the next renewal. On failure it schedules a retry with backoff and rejects.
   */
  rotateNow(): Promise<CertKeyPair> {
    if (this.inFlight) return this.inFlight;
    this.cancelTimer();
    const attempt = this.attempt().finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = attempt;
    return attempt;
  }

  /** Cancels the pending renewal; an attempt in flight finishes but hands nothing to `onRotate`. */
  stop(): void {
    this.stopped = true;
    this.cancelTimer();
  }

  /** The last pair handed to `onRotate` (or given to `start`). */
  get currentPair(): CertKeyPair | undefined {
    return this.current;
  }

  private async attempt(): Promise<CertKeyPair> {
    try {
      const pair = await this.opts.issue();
      const dueAt = this.renewalTimeOf(pair);
      const recheckMs = this.opts.recheckMs ?? 0;
      // A pair that is already due would make us spin: without rechecks, a failure (back off);
      // with them, `issue` kept it on purpose, and the next look is one recheck away.
      if (dueAt <= this.opts.clock.now() && recheckMs <= 0) throw new Error('issued certificate is already due for renewal');
      if (this.stopped) return pair;
      await this.opts.onRotate(pair);
      this.current = pair;
      this.failures = 0;
      if (!this.stopped) this.scheduleAt(this.nextCheckAt(Math.max(dueAt, this.opts.clock.now() + 1)));
      return pair;
    } catch (err) {
      this.failures++;
      this.opts.onError?.(err, this.failures);
      if (!this.stopped) this.scheduleIn(this.backoffMs());
      throw err;
    }
  }

  /** The renewal time, or the next recheck when that comes first (so a due pair waits one recheck). */
  private nextCheckAt(dueAt: number): number {
    const recheck = this.opts.recheckMs;
    return recheck !== undefined && recheck > 0 ? Math.min(dueAt, this.opts.clock.now() + recheck) : dueAt;
  }

  private renewalTimeOf(pair: CertKeyPair): number {
    return renewalTimeMs(readCertificate(pair.certPem), this.opts);
  }

  private backoffMs(): number {
    const initial = this.opts.retryInitialMs ?? 1000;
    const max = this.opts.retryMaxMs ?? 5 * 60 * 1000;
    return Math.min(max, initial * 2 ** Math.min(this.failures - 1, 30));
  }

  private scheduleAt(atMs: number): void {
    this.scheduleIn(atMs - this.opts.clock.now());
  }

  private scheduleIn(delayMs: number): void {
    this.cancelTimer();
    const clamped = Math.max(0, delayMs);
    if (clamped > MAX_TIMER_MS) {
      const target = this.opts.clock.now() + clamped;
      this.timer = this.opts.clock.setTimeout(() => this.scheduleAt(target), MAX_TIMER_MS);
      return;
    }
    this.timer = this.opts.clock.setTimeout(() => {
      this.timer = undefined;
      // Failures are reported through onError and retried; nothing to do with the rejection here.
      this.rotateNow().catch(() => undefined);
    }, clamped);
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) {
      this.opts.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
