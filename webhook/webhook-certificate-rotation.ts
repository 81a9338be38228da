import { CertRotator } from '../certs/cert-rotator.js';
import type { CertClock, CertKeyPair } from '../certs/cert-types.js';
import type { RenewalPolicy } from '../certs/renewal-time.js';
import type { ProxySchedulerClientCertificate } from './proxy-scheduler-client-certificate.js';
import { trustedCaPems, type WebhookCertificateBundle, type WebhookCertificates } from './webhook-certificates.js';

/** Default of {@link WebhookCertificateRotationOptions.recheckMs}. */
export const DEFAULT_WEBHOOK_CERT_RECHECK_MS = 5 * 60 * 1000;

export interface WebhookCertificateRotationOptions {
  certs: Pick<WebhookCertificates, 'ensureServingCertificate' | 'ensureCaBundle'>;
  /** The MutatingWebhookConfiguration whose caBundle is kept current. */
  webhookConfigName: string;
  /** The proxy scheduler's client certificate; omitted when this process serves no extender. */
  clientCertificate?: Pick<ProxySchedulerClientCertificate, 'ensure'>;
  /**
   * Serves `pair` to new handshakes and verifies client certificates against `trustedCaPems`.
   * Called whenever either changed, never for the first bundle (which `start` returns).
   */
  serve: (pair: CertKeyPair, trustedCaPems: readonly string[]) => void;
  clock: CertClock;
  /**
   * How often each replica re-reads the Secret even when nothing of its own is due, so that a
   * CA rotated by another replica reaches it. Two of them, plus the time the proxy scheduler
   * takes to load a renewed client certificate, must fit in the `previousCaRetentionMs` of
   * `WebhookCertificates` (20 minutes by default). Default 5 minutes.
   */
  recheckMs?: number;
  /** Renewal policy of both certificates; must match the one `WebhookCertificates` uses. */
  renewal?: RenewalPolicy;
  /** Failed attempts (the rotators retry by themselves) and caBundle updates that failed. */
  onError?: (what: 'serving' | 'caBundle' | 'client', err: unknown) => void;
  /** Every newly served or issued certificate (for expiry metrics). */
  onIssued?: (what: 'serving' | 'client', pair: CertKeyPair) => void;
}

/**
 * Keeps one replica's webhook server on the shared certificates: the serving certificate and
 * the CAs it trusts (from Secret admiralty-webhook-cert), the webhook configuration's caBundle,
 * and the proxy scheduler's client certificate. Every replica runs one; they agree through the
 * Secret.
 *
 * A CA rotation, in order: the replica that finds the CA due writes the new CA with the old one
 * kept as previous (`WebhookCertificates`), sets the caBundle to both, and only then serves the
 * new certificate (if the caBundle cannot be written, it keeps serving the old one and retries);
 * the other replicas pick up the new certificate and trust list within `recheckMs`. The client
 * certificate stays on the old CA for two `recheckMs` after the rotation (until every replica
 * trusts the new CA, even after one failed recheck), then moves to it. The old CA leaves the caBundle and the trust lists once
 * its retention has passed.
 */
export class WebhookCertificateRotation {
  private readonly serving: CertRotator;
  private readonly client: CertRotator | undefined;
  private readonly recheckMs: number;
  /** The bundle of the last successful serving issue, applied by onRotate. */
  private pending: WebhookCertificateBundle | undefined;
  /** What the server serves now. */
  private served: { certPem: string; caPem: string; trusted: string } | undefined;
  private latest: WebhookCertificateBundle | undefined;

  constructor(private readonly opts: WebhookCertificateRotationOptions) {
    this.recheckMs = opts.recheckMs ?? DEFAULT_WEBHOOK_CERT_RECHECK_MS;
    const common = { clock: opts.clock, recheckMs: this.recheckMs, ...opts.renewal };
    this.serving = new CertRotator({ ...common, issue: () => this.issueServing(), onRotate: (pair) => this.apply(pair), onError: (err) => opts.onError?.('serving', err) });
    const clientCertificate = opts.clientCertificate;
    this.client =
      clientCertificate &&
      new CertRotator({
        ...common,
        issue: () => this.issueClient(clientCertificate),
        onRotate: (pair) => opts.onIssued?.('client', pair),
        onError: (err) => opts.onError?.('client', err),
      });
  }

  /**
   * Loads (or creates) the certificates and starts renewing them. Resolves with what to create
   * the server with; rejects if the serving certificate cannot be had (the rotator keeps
   * trying). A client certificate that fails is reported through `onError` and retried.
   */
  async start(): Promise<{ pair: CertKeyPair; trustedCaPems: string[] }> {
    const pair = await this.serving.start().then(() => this.serving.currentPair!);
    await this.client?.start().catch(() => undefined);
    return { pair, trustedCaPems: trustedCaPems(this.latest!) };
  }

  /** Re-reads and renews what is due now (e.g. on SIGHUP after the Secret was deleted). */
  async rotateNow(): Promise<void> {
    await this.serving.rotateNow();
    await this.client?.rotateNow();
  }

  stop(): void {
    this.serving.stop();
    this.client?.stop();
  }

  /** The last bundle read from the Secret (undefined before `start`). */
  get bundle(): WebhookCertificateBundle | undefined {
    return this.latest;
  }

  private async issueServing(): Promise<CertKeyPair> {
    const bundle = await this.opts.certs.ensureServingCertificate();
    try {
      await this.opts.certs.ensureCaBundle(this.opts.webhookConfigName, trustedCaPems(bundle).join(''));
    } catch (err) {
      // A certificate of a CA the apiserver does not trust would fail every admission call
      // (failurePolicy Fail): keep serving the current one, and retry with backoff.
      if (this.served && this.served.caPem !== bundle.caPem) {
        throw new Error(`the caBundle of ${this.opts.webhookConfigName} could not be set to the new CA; serving the previous certificate meanwhile`, { cause: err });
      }
      this.opts.onError?.('caBundle', err);
    }
    this.pending = bundle;
    return { certPem: bundle.certPem, keyPem: bundle.keyPem };
  }

  private apply(pair: CertKeyPair): void {
    const bundle = this.pending!;
    const trusted = trustedCaPems(bundle);
    const next = { certPem: pair.certPem, caPem: bundle.caPem, trusted: trusted.join('') };
    const previous = this.served;
    const changed = !previous || previous.certPem !== next.certPem || previous.trusted !== next.trusted;
    // A serve that throws leaves everything as it was; the rotator retries.
    if (previous && changed) this.opts.serve(pair, trusted);
    this.served = next;
    this.latest = bundle;
    if (previous?.certPem !== next.certPem) this.opts.onIssued?.('serving', pair);
  }

  private issueClient(clientCertificate: Pick<ProxySchedulerClientCertificate, 'ensure'>): Promise<CertKeyPair> {
    const bundle = this.latest!;
    const ca = { certPem: bundle.caPem, keyPem: bundle.caKeyPem };
    // Right after a CA rotation some replicas do not trust the new CA yet: a certificate of a
    // previous CA is kept (even if due) for two recheck periods (every replica has re-read the
    // Secret by then, even one whose first rechecks failed), then moved to the new CA, well
    // before the previous CA is trimmed.
    const settled = bundle.caRotatedAtMs === undefined || this.opts.clock.now() >= bundle.caRotatedAtMs + 2 * this.recheckMs;
    return clientCertificate.ensure(ca, settled ? [] : bundle.previousCaPems);
  }
}
