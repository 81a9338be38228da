import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { AdmissionregistrationV1Api, CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { createCA } from '../certs/create-ca.js';
import { createServingCert } from '../certs/create-serving-cert.js';
import { normalizeIp, readCertificate } from '../certs/read-certificate.js';
import { renewalTimeMs, type RenewalPolicy } from '../certs/renewal-time.js';
import { verifySignedBy } from '../certs/verify-signed-by.js';
import { isConflict } from '../provider/core/errors.js';
import { readSecretIfExists } from './read-secret-if-exists.js';
import { CA_ROTATED_AT_ANNOTATION } from '../provider/core/keys.js';
import { escapePointerToken, type JsonPatchOp } from './create-json-patch.js';

/** The CA and the serving certificate of the webhook, all PEM. */
export interface WebhookCertificateBundle {
  caPem: string;
  caKeyPem: string;
  certPem: string;
  keyPem: string;
  /**
   * CAs replaced by `caPem` that a replica may still be serving a certificate of, newest first
   * (empty but for a while after a CA rotation). Trusted with `caPem`: see {@link trustedCaPems}.
   */
  previousCaPems: string[];
  /** When `caPem` replaced the previous CAs (ms since the epoch); undefined when there are none. */
  caRotatedAtMs: number | undefined;
}

/** Every CA to trust for this bundle, current first: what the caBundle and client-certificate checks use. Pure. */
export function trustedCaPems(bundle: Pick<WebhookCertificateBundle, 'caPem' | 'previousCaPems'>): string[] {
  return [bundle.caPem, ...bundle.previousCaPems];
}

export interface WebhookCertificatesOptions {
  core: Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret'>;
  admissionRegistration: Pick<AdmissionregistrationV1Api, 'readMutatingWebhookConfiguration' | 'patchMutatingWebhookConfiguration'>;
  /** Where the Secret lives (usually the provider's namespace). */
  namespace: string;
  secretName: string;
  /** SANs the serving cert must carry exactly, e.g. `<service>.<namespace>.svc`. The first is also the CN. */
  dnsNames: readonly string[];
  ipAddresses?: readonly string[];
  /** Milliseconds since the epoch. */
  clock: { now(): number };
  /** Default 3650. */
  caValidityDays?: number;
  /** Default 365. */
  servingValidityDays?: number;
  /** When a certificate counts as near expiry; the same policy should drive the `CertRotator`. */
  renewal?: RenewalPolicy;
  /**
   * How long a replaced CA stays trusted (in the caBundle and for client certificates) after the
   * rotation, unless it expires first. Must exceed the longest time a replica can go on serving
   * a certificate of the old CA (its `recheckMs`, plus retries), and the time the proxy scheduler
   * needs to pick up its client certificate reissued by the new CA (see
   * `WebhookCertificateRotation`). Default 20 minutes, for 5-minute rechecks.
   */
  previousCaRetentionMs?: number;
}

/** Default of {@link WebhookCertificatesOptions.previousCaRetentionMs}. */
export const DEFAULT_PREVIOUS_CA_RETENTION_MS = 20 * 60 * 1000;

/** Keys of the Secret (tls.crt/tls.key as in a `kubernetes.io/tls` Secret). */
const CA_CERT_KEY = 'ca.crt';
const CA_KEY_KEY = 'ca.key';
const TLS_CERT_KEY = 'tls.crt';
const TLS_KEY_KEY = 'tls.key';
/** Previous CAs, PEM, concatenated (newest first); absent when there are none. */
const CA_PREVIOUS_KEY = 'ca-previous.crt';

/** Conflicts tolerated in one call before giving up (another replica keeps winning). */
const MAX_ATTEMPTS = 5;

/**
 * Keeps the webhook's CA and serving certificate in a Secret, and the CA in the
 * MutatingWebhookConfiguration: the replacement for cert-manager. Safe to call from several
 * replicas at once (create races and update conflicts are resolved by re-reading).
 *
 * Called by `main.ts` at start-up and by the webhook's `CertRotator`
 * (`issue = () => certs.ensureServingCertificate()` then `ensureCaBundle`).
 */
export class WebhookCertificates {
  constructor(private readonly opts: WebhookCertificatesOptions) {}

  /**
   * Loads the bundle from the Secret, creating the Secret if missing and regenerating what is
   * unusable: the CA when missing, unparsable or near expiry (then the serving cert too); the
   * serving cert when missing, not signed by the CA, not matching its key, near expiry, or
   * when its SANs differ from `dnsNames`/`ipAddresses`. Idempotent: returns the stored bundle
   * when it is fine.
   *
   * CA rotation appends: the replaced CA (unless expired) is kept in `ca-previous.crt` with the
   * Secret annotated `ca-rotated-at` = now, because the other replicas serve a certificate of
   * the old CA until they re-read the Secret. Previous CAs are dropped `previousCaRetentionMs`
   * after that instant, or when they expire; the call that drops them writes the Secret.
   */
  async ensureServingCertificate(): Promise<WebhookCertificateBundle> {
    const { core, namespace, secretName: name } = this.opts;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const secret = await readSecretIfExists(core, namespace, name);
      if (!secret) {
        const bundle = this.generate(undefined, [], undefined);
        try {
          await core.createNamespacedSecret({
            namespace,
            body: { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name, namespace }, data: encode(bundle).data },
          });
          return bundle;
        } catch (err) {
          // Another replica created it first: use (and check) theirs.
          if (isConflict(err)) continue;
          throw new Error(`creating Secret ${namespace}/${name}`, { cause: err });
        }
      }
      const stored = decode(secret);
      const { bundle, changed } = this.repair(stored);
      if (!changed) return bundle;
      try {
        // Replace carries the resourceVersion we read: a concurrent writer makes this a 409.
        await core.replaceNamespacedSecret({ name, namespace, body: withBundle(secret, bundle) });
        return bundle;
      } catch (err) {
        if (isConflict(err)) continue;
        throw new Error(`updating Secret ${namespace}/${name}`, { cause: err });
      }
    }
    throw new Error(`Secret ${namespace}/${name}: gave up after ${MAX_ATTEMPTS} conflicting writes`);
  }

  /**
   * Sets `clientConfig.caBundle` to `caPem` (base64; one PEM or several concatenated, e.g. the
   * {@link trustedCaPems} joined) on every webhook of the
   * MutatingWebhookConfiguration `webhookConfigName` whose value differs, in one JSON patch
   * guarded by `test` ops on the webhook names (so a concurrent reorder fails instead of
   * patching the wrong entry). Returns how many webhooks were patched; 0 means no request.
   * Errors (including 404) propagate, for the caller to retry.
   */
  async ensureCaBundle(webhookConfigName: string, caPem: string): Promise<number> {
    const api = this.opts.admissionRegistration;
    const config = await api.readMutatingWebhookConfiguration({ name: webhookConfigName });
    const wanted = Buffer.from(caPem).toString('base64');
    const ops: JsonPatchOp[] = [];
    let patched = 0;
    (config.webhooks ?? []).forEach((webhook, i) => {
      if (webhook.clientConfig?.caBundle === wanted) return;
      patched++;
      ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: webhook.name });
      if (webhook.clientConfig) ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig/${escapePointerToken('caBundle')}`, value: wanted });
      else ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig`, value: { caBundle: wanted } });
    });
    if (patched === 0) return 0;
    // JSON patch is client-node's default patch content type.
    await api.patchMutatingWebhookConfiguration({ name: webhookConfigName, body: ops });
    return patched;
  }

  /** The stored bundle when usable, else one with the unusable parts regenerated; previous CAs past their retention or expiry dropped. */
  private repair(stored: StoredBundle): { bundle: WebhookCertificateBundle; changed: boolean } {
    const now = this.opts.clock.now();
    const retentionMs = this.opts.previousCaRetentionMs ?? DEFAULT_PREVIOUS_CA_RETENTION_MS;
    const retained = stored.caRotatedAtMs !== undefined && now < stored.caRotatedAtMs + retentionMs ? stored.previousCaPems.filter((p) => notExpired(p, now)) : [];
    const caOk = stored.caPem !== undefined && stored.caKeyPem !== undefined && this.usable(stored.caPem, stored.caKeyPem, now);
    if (!caOk) {
      // The replaced CA stays trusted while replicas may still serve its certificates.
      const previous = [...(stored.caPem !== undefined && notExpired(stored.caPem, now) ? [stored.caPem] : []), ...retained];
      return { bundle: this.generate(undefined, previous, previous.length > 0 ? now : undefined), changed: true };
    }
    const ca = { certPem: stored.caPem!, keyPem: stored.caKeyPem! };
    const rotatedAtMs = retained.length > 0 ? stored.caRotatedAtMs : undefined;
    const trimmed = retained.length !== stored.previousCaPems.length;
    const servingOk =
      stored.certPem !== undefined && stored.keyPem !== undefined && this.usable(stored.certPem, stored.keyPem, now) && verifySignedBy(stored.certPem, ca.certPem) && this.sansMatch(stored.certPem);
    if (!servingOk) return { bundle: this.generate(ca, retained, rotatedAtMs), changed: true };
    const bundle = { caPem: ca.certPem, caKeyPem: ca.keyPem, certPem: stored.certPem!, keyPem: stored.keyPem!, previousCaPems: retained, caRotatedAtMs: rotatedAtMs };
    return { bundle, changed: trimmed };
  }

  /** Parses, key matches, not yet due for renewal. */
  private usable(certPem: string, keyPem: string, now: number): boolean {
    try {
      if (!new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem))) return false;
      return now < renewalTimeMs(readCertificate(certPem), this.opts.renewal);
    } catch {
      return false;
    }
  }

  private sansMatch(certPem: string): boolean {
    const info = readCertificate(certPem);
    const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().every((v, i) => v === [...b].sort()[i]);
    return same(info.dnsNames, this.opts.dnsNames) && same(info.ipAddresses, (this.opts.ipAddresses ?? []).map(normalizeIp));
  }

  private generate(existingCa: { certPem: string; keyPem: string } | undefined, previousCaPems: string[], caRotatedAtMs: number | undefined): WebhookCertificateBundle {
    const now = this.opts.clock.now();
    const ca = existingCa ?? createCA({ commonName: `${this.opts.secretName}-ca`, validityDays: this.opts.caValidityDays ?? 3650, now });
    const serving = createServingCert({
      ca,
      commonName: this.opts.dnsNames[0] ?? this.opts.ipAddresses?.[0] ?? this.opts.secretName,
      dnsNames: this.opts.dnsNames,
      ipAddresses: this.opts.ipAddresses,
      validityDays: this.opts.servingValidityDays ?? 365,
      now,
    });
    return { caPem: ca.certPem, caKeyPem: ca.keyPem, certPem: serving.certPem, keyPem: serving.keyPem, previousCaPems, caRotatedAtMs };
  }
}

/** What the Secret holds, each part possibly missing. */
interface StoredBundle extends Partial<Omit<WebhookCertificateBundle, 'previousCaPems' | 'caRotatedAtMs'>> {
  previousCaPems: string[];
  caRotatedAtMs: number | undefined;
}

/** Whether a PEM certificate parses and has not expired at `now`. */
function notExpired(certPem: string, now: number): boolean {
  try {
    return now < readCertificate(certPem).notAfter.getTime();
  } catch {
    return false;
  }
}

/** The PEM certificates of a concatenation, as written (line ends kept), each ending with a newline. */
function splitPems(text: string): string[] {
  return (text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----(\r?\n)?/g) ?? []).map((p) => (p.endsWith('\n') ? p : `${p}\n`));
}

/** `secret` with `bundle` written into it: keys set, `ca-previous.crt` and its annotation set or removed. */
function withBundle(secret: V1Secret, bundle: WebhookCertificateBundle): V1Secret {
  const { data, previous } = encode(bundle);
  const merged: Record<string, string> = { ...secret.data, ...data };
  const annotations: Record<string, string> = { ...secret.metadata?.annotations };
  if (previous !== undefined && bundle.caRotatedAtMs !== undefined) {
    merged[CA_PREVIOUS_KEY] = previous;
    annotations[CA_ROTATED_AT_ANNOTATION] = new Date(bundle.caRotatedAtMs).toISOString();
  } else {
    delete merged[CA_PREVIOUS_KEY];
    delete annotations[CA_ROTATED_AT_ANNOTATION];
  }
  return { ...secret, metadata: { ...secret.metadata, annotations }, data: merged };
}

function encode(bundle: WebhookCertificateBundle): { data: Record<string, string>; previous: string | undefined } {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return {
    data: { [CA_CERT_KEY]: b64(bundle.caPem), [CA_KEY_KEY]: b64(bundle.caKeyPem), [TLS_CERT_KEY]: b64(bundle.certPem), [TLS_KEY_KEY]: b64(bundle.keyPem) },
    previous: bundle.previousCaPems.length > 0 ? b64(bundle.previousCaPems.join('')) : undefined,
  };
}

function decode(secret: V1Secret): StoredBundle {
  const data = secret.data ?? {};
  const get = (key: string) => (data[key] ? Buffer.from(data[key], 'base64').toString('utf8') : undefined);
  const rotatedAt = Date.parse(secret.metadata?.annotations?.[CA_ROTATED_AT_ANNOTATION] ?? '');
  return {
    caPem: get(CA_CERT_KEY),
    caKeyPem: get(CA_KEY_KEY),
    certPem: get(TLS_CERT_KEY),
    keyPem: get(TLS_KEY_KEY),
    previousCaPems: splitPems(get(CA_PREVIOUS_KEY) ?? ''),
    caRotatedAtMs: Number.isFinite(rotatedAt) ? rotatedAt : undefined,
  };
}
