import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import type { CertKeyPair } from '../certs/cert-types.js';
import { createClientCert } from '../certs/create-client-cert.js';
import { readCertificate } from '../certs/read-certificate.js';
import { renewalTimeMs, type RenewalPolicy } from '../certs/renewal-time.js';
import { verifySignedBy } from '../certs/verify-signed-by.js';
import { isConflict } from '../provider/core/errors.js';
import { readSecretIfExists } from './read-secret-if-exists.js';

export interface ProxySchedulerClientCertificateOptions {
  core: Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret'>;
  /** The provider's namespace, where the proxy scheduler's Deployment mounts the Secret from. */
  namespace: string;
  /** Usually `admiralty-proxy-scheduler-client`. */
  secretName: string;
  /** The identity the extender checks (`PROXY_SCHEDULER_CLIENT_CN`). */
  commonName: string;
  /** Milliseconds since the epoch. */
  clock: { now(): number };
  /** Default 365. */
  validityDays?: number;
  /** When the certificate counts as near expiry; the same policy should drive its `CertRotator`. */
  renewal?: RenewalPolicy;
}

/** Keys of a `kubernetes.io/tls` Secret: what kube-scheduler's extender `tlsConfig.certFile`/`keyFile` point at. */
const TLS_CERT_KEY = 'tls.crt';
const TLS_KEY_KEY = 'tls.key';

/** Conflicts tolerated in one call before giving up (another replica keeps winning). */
const MAX_ATTEMPTS = 5;

/**
 * Keeps the proxy scheduler's client certificate in a `kubernetes.io/tls` Secret of the
 * provider's namespace, signed by the webhook's current CA. Safe to call from several replicas
 * at once (create races and update conflicts are resolved by re-reading).
 *
 * Called by `WebhookCertificateRotation` through a `CertRotator`, which moves the certificate to
 * a new CA once every replica trusts it, and before the old one is trimmed.
 */
export class ProxySchedulerClientCertificate {
  constructor(private readonly opts: ProxySchedulerClientCertificateOptions) {}

  /**
   * Returns the stored pair when it is usable: parses, matches its key, is signed by `ca`, has
   * the expected CN and `clientAuth`, and is not yet due for renewal. Otherwise issues a new one
   * from `ca` and stores it (create, or replace guarded by resourceVersion). Idempotent.
   *
   * `holdOnCaPems`: previous CAs, given right after a CA rotation while some replicas may not
   * trust `ca` yet. A stored certificate of one of them (or of `ca`) is then kept until it
   * expires, even when due: a new one could only come from `ca`.
   */
  async ensure(ca: CertKeyPair, holdOnCaPems: readonly string[] = []): Promise<CertKeyPair> {
    const { core, namespace, secretName: name } = this.opts;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const secret = await readSecretIfExists(core, namespace, name);
      const stored = secret && decode(secret);
      if (stored && this.usable(stored, [ca.certPem, ...holdOnCaPems], holdOnCaPems.length > 0)) return stored;
      const pair = createClientCert({ ca, commonName: this.opts.commonName, validityDays: this.opts.validityDays ?? 365, now: this.opts.clock.now() });
      try {
        if (!secret) {
          await core.createNamespacedSecret({
            namespace,
            body: { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name, namespace }, data: encode(pair) },
          });
        } else {
          await core.replaceNamespacedSecret({ name, namespace, body: { ...secret, data: { ...secret.data, ...encode(pair) } } });
        }
        return pair;
      } catch (err) {
        // Another replica wrote it first: re-read, and use theirs if it is fine.
        if (isConflict(err)) continue;
        throw new Error(`${secret ? 'updating' : 'creating'} Secret ${namespace}/${name}`, { cause: err });
      }
    }
    throw new Error(`Secret ${namespace}/${name}: gave up after ${MAX_ATTEMPTS} conflicting writes`);
  }

  private usable(pair: CertKeyPair, acceptedCaPems: readonly string[], untilExpiry: boolean): boolean {
    try {
      const x = new X509Certificate(pair.certPem);
      if (!x.checkPrivateKey(createPrivateKey(pair.keyPem))) return false;
      if (!acceptedCaPems.some((caPem) => verifySignedBy(pair.certPem, caPem))) return false;
      // 1.3.6.1.5.5.7.3.2: id-kp-clientAuth.
      if (!(x.keyUsage ?? []).includes('1.3.6.1.5.5.7.3.2')) return false;
      const info = readCertificate(pair.certPem);
      if (info.subjectCommonName !== this.opts.commonName) return false;
      return this.opts.clock.now() < (untilExpiry ? info.notAfter.getTime() : renewalTimeMs(info, this.opts.renewal));
    } catch {
      return false;
    }
  }
}

function encode(pair: CertKeyPair): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return { [TLS_CERT_KEY]: b64(pair.certPem), [TLS_KEY_KEY]: b64(pair.keyPem) };
}

function decode(secret: V1Secret): CertKeyPair | undefined {
  const data = secret.data ?? {};
  if (!data[TLS_CERT_KEY] || !data[TLS_KEY_KEY]) return undefined;
  const get = (key: string) => Buffer.from(data[key]!, 'base64').toString('utf8');
  return { certPem: get(TLS_CERT_KEY), keyPem: get(TLS_KEY_KEY) };
}
