import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import type { CertificatesV1Api, V1CertificateSigningRequest, V1CertificateSigningRequestCondition } from '@kubernetes/client-node';
import { createCsr } from '../../certs/create-csr.js';
import { createSelfSignedServingCert } from '../../certs/create-self-signed-serving-cert.js';
import type { Clock } from '../core/clock.js';
import { statusCode } from '../core/errors.js';
import { errorFields, type Logger } from '../core/logger.js';

/** The signer kubelets use for their serving certificates (kube-controller-manager `csrsigning`). */
export const KUBELET_SERVING_SIGNER = 'kubernetes.io/kubelet-serving';

/** Reason of the `Approved` condition the provider puts on its own CSR (shows in `kubectl get csr`). */
export const SELF_APPROVAL_REASON = 'AdmiraltyAutoApproved';

/** Prefix of the names of our CSRs: `admiralty-kubelet-serving-<nodeName>-<random>`. */
export const CSR_NAME_PREFIX = 'admiralty-kubelet-serving-';

const ONE_YEAR_SECONDS = 365 * 24 * 60 * 60;
// Longest object name the apiserver accepts for a CSR (a DNS subdomain).
const MAX_NAME_LENGTH = 253;
// Attempts of the approval read-modify-write when someone else updates the CSR in between.
const APPROVAL_ATTEMPTS = 3;

/** The calls of `CertificatesV1Api` used here; a real `CertificatesV1Api` fits. */
export type CsrClient = Pick<CertificatesV1Api, 'createCertificateSigningRequest' | 'readCertificateSigningRequest' | 'replaceCertificateSigningRequestApproval' | 'deleteCertificateSigningRequest'>;

export interface KubeletServingCertificateOptions {
  /** Client of the cluster whose apiserver connects to the kubelet API (the source cluster). */
  certificates: CsrClient;
  /**
   * Identity of the certificate: the subject is `CN=system:node:<nodeName>, O=system:nodes`, as the
   * kubelet-serving signer requires. One server serves all virtual nodes, so this is e.g. the first
   * virtual node's name or `admiralty-<cluster>`. Must be a valid object-name fragment.
   */
  nodeName: string;
  /** IP SANs: the address(es) the virtual nodes publish, i.e. what the apiserver dials. */
  ipAddresses: readonly string[];
  /** DNS SANs. At least one DNS name or IP address is required overall. */
  dnsNames: readonly string[];
  /** Default `kubernetes.io/kubelet-serving`; e.g. `beta.eks.amazonaws.com/app-serving` on EKS. */
  signerName?: string;
  /** Requested lifetime (`spec.expirationSeconds`, at least 600); the signer may cap it. Default one year. */
  expirationSeconds?: number;
  clock: Clock;
  logger: Logger;
  /** Time box of the whole CSR flow (create, approve, wait for the signer). Default 30 s. */
  waitTimeoutMs?: number;
  /** Delay between two reads of the CSR while waiting for `status.certificate`. Default 500 ms. */
  pollIntervalMs?: number;
}

/** A certificate (chain, leaf first) and key for the kubelet API server, and how it was obtained. */
export interface KubeletServingCertificatePair {
  certPem: string;
  keyPem: string;
  /** True when the CSR flow failed and a self-signed certificate was created instead. */
  selfSigned: boolean;
}

/**
 * Obtains the serving certificate of the provider's kubelet API server the way a kubelet with
 * `serverTLSBootstrap` does: a `CertificateSigningRequest` for the kubelet-serving signer, which
 * the provider approves itself (kubelet-serving CSRs are never auto-approved by
 * kube-controller-manager), then waits for the signer to fill in `status.certificate`.
 *
 * When any step fails (RBAC refuses the create or the approval, the CSR is denied or fails signer
 * validation, the signer does not answer within `waitTimeoutMs`) it falls back to a self-signed
 * certificate, logs a warning, and reports `selfSigned: true`: kube-apiserver accepts it unless it
 * verifies kubelet certificates (`--kubelet-certificate-authority`).
 *
 * `issue` never rejects unless even the self-signed certificate cannot be built (no SAN, bad IP).
 * Each call files a new CSR and deletes it afterwards (best effort). Meant to be the `issue` of a
 * `CertRotator`: `new CertRotator({ issue: () => kc.issue(), ... })`, called by `main.ts`.
 *
 * RBAC needed: `create`, `get`, `delete` on `certificatesigningrequests`, `update` on
 * `certificatesigningrequests/approval`, and `approve` on `signers` named `signerName`.
 */
export class KubeletServingCertificate {
  private readonly signerName: string;
  private readonly expirationSeconds: number;
  private readonly waitTimeoutMs: number;
  private readonly pollIntervalMs: number;

  constructor(private readonly opts: KubeletServingCertificateOptions) {
    this.signerName = opts.signerName ?? KUBELET_SERVING_SIGNER;
    this.expirationSeconds = opts.expirationSeconds ?? ONE_YEAR_SECONDS;
    this.waitTimeoutMs = opts.waitTimeoutMs ?? 30_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 500;
  }

  /** The subject common name of the certificates issued: `system:node:<nodeName>`. */
  get commonName(): string {
    return `system:node:${this.opts.nodeName}`;
  }

  /** Obtains a certificate through the CSR API, or a self-signed one if that fails. */
  async issue(): Promise<KubeletServingCertificatePair> {
    const name = csrName(this.opts.nodeName);
    try {
      const pair = await this.withTimeBox(name, (signal) => this.requestSigned(name, signal));
      this.opts.logger.info('kubelet serving certificate issued by the signer', {
        csr: name,
        signerName: this.signerName,
        notAfter: pair.notAfter.toISOString(),
      });
      return { certPem: pair.certPem, keyPem: pair.keyPem, selfSigned: false };
    } catch (err) {
      this.opts.logger.warn(
        'could not obtain a kubelet serving certificate through the CSR API; serving a self-signed certificate instead. ' +
          'The apiserver will refuse it (logs, exec, attach and port-forward fail with x509 errors) if it verifies ' +
          'kubelet certificates (--kubelet-certificate-authority)',
        { csr: name, signerName: this.signerName, ...errorFields(err) },
      );
      const pair = createSelfSignedServingCert({
        commonName: this.commonName,
        dnsNames: this.opts.dnsNames,
        ipAddresses: this.opts.ipAddresses,
        validityDays: Math.max(1, Math.floor(this.expirationSeconds / (24 * 60 * 60))),
        now: this.opts.clock.now(),
      });
      return { ...pair, selfSigned: true };
    }
  }

  /**
   * Runs the CSR flow with a deadline of `waitTimeoutMs`. A hung API call cannot hold `issue`
   * past the deadline; the flow itself notices the abort at its next step and cleans up.
   */
  private async withTimeBox<T>(name: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const { clock } = this.opts;
    const controller = new AbortController();
    const timer = clock.setTimeout(() => {
      controller.abort(new Error(`the CSR ${name} was not signed within ${this.waitTimeoutMs} ms (is the signer ${this.signerName} enabled?)`));
    }, this.waitTimeoutMs);
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
    });
    const running = work(controller.signal);
    // Once the deadline won the race, the flow's own failure is of no interest to anyone.
    running.catch(() => undefined);
    try {
      return await Promise.race([running, aborted]);
    } finally {
      clock.clearTimeout(timer);
    }
  }

  /** Create -> approve -> wait for the certificate; deletes the CSR in every case once created. */
  private async requestSigned(name: string, signal: AbortSignal): Promise<{ certPem: string; keyPem: string; notAfter: Date }> {
    const { certificates } = this.opts;
    const { csrPem, keyPem } = createCsr({
      commonName: this.commonName,
      organization: 'system:nodes',
      dnsNames: this.opts.dnsNames,
      ipAddresses: this.opts.ipAddresses,
    });
    const body: V1CertificateSigningRequest = {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'admiralty' } },
      spec: {
        request: Buffer.from(csrPem, 'utf8').toString('base64'),
        signerName: this.signerName,
        usages: ['digital signature', 'key encipherment', 'server auth'],
        expirationSeconds: this.expirationSeconds,
      },
    };
    let filed: V1CertificateSigningRequest;
    try {
      filed = await certificates.createCertificateSigningRequest({ body });
    } catch (err) {
      throw new Error(`cannot create the CSR ${name} (HTTP ${statusCode(err) ?? 'n/a'})`, { cause: err });
    }
    try {
      throwIfAborted(signal);
      await this.approve(name, filed);
      const certPem = await this.waitForCertificate(name, signal);
      const { notAfter } = checkMatchesKey(certPem, keyPem, name);
      return { certPem, keyPem, notAfter };
    } finally {
      await this.deleteQuietly(name);
    }
  }

  /**
   * Adds our `Approved` condition through the approval subresource: read, append to the read
   * object (its resourceVersion makes the update optimistic), replace; retried on conflict.
   * A CSR already approved (by an approver controller) is left alone.
   *
   * Only the very CSR `filed` is approved (same UID, request and signer): RBAC lets the provider
   * approve any CSR of its signer, so a CSR put in its place under the same name (by whoever may
   * delete and create CSRs) must not get the provider's approval for an identity or addresses
   * that are not the provider's.
   */
  private async approve(name: string, filed: V1CertificateSigningRequest): Promise<void> {
    const { certificates, clock } = this.opts;
    for (let attempt = 1; ; attempt++) {
      let csr: V1CertificateSigningRequest;
      try {
        csr = await certificates.readCertificateSigningRequest({ name });
      } catch (err) {
        throw new Error(`cannot read the CSR ${name} to approve it (HTTP ${statusCode(err) ?? 'n/a'})`, { cause: err });
      }
      if (!filed.metadata?.uid || csr.metadata?.uid !== filed.metadata.uid || csr.spec?.request !== filed.spec?.request || csr.spec?.signerName !== filed.spec?.signerName) {
        throw new Error(`the CSR ${name} is not the one the provider filed (replaced in between); not approving it`);
      }
      const conditions = csr.status?.conditions ?? [];
      const final = finalCondition(conditions);
      if (final) throw new Error(`the CSR ${name} was ${describeCondition(final)}`);
      if (conditions.some((c) => c.type === 'Approved' && c.status === 'True')) return;
      const now = new Date(clock.now());
      const approved: V1CertificateSigningRequestCondition = {
        type: 'Approved',
        status: 'True',
        reason: SELF_APPROVAL_REASON,
        message: `Approved by the Admiralty virtual-kubelet provider for its kubelet API server (node ${this.opts.nodeName})`,
        lastUpdateTime: now,
        lastTransitionTime: now,
      };
      csr.status = { ...csr.status, conditions: [...conditions, approved] };
      try {
        await certificates.replaceCertificateSigningRequestApproval({ name, body: csr });
        return;
      } catch (err) {
        if (statusCode(err) === 409 && attempt < APPROVAL_ATTEMPTS) continue;
        throw new Error(`cannot approve the CSR ${name} (HTTP ${statusCode(err) ?? 'n/a'})`, { cause: err });
      }
    }
  }

  /** Reads the CSR every `pollIntervalMs` until the signer set `status.certificate` (base64 PEM). */
  private async waitForCertificate(name: string, signal: AbortSignal): Promise<string> {
    const { certificates } = this.opts;
    for (;;) {
      throwIfAborted(signal);
      let csr: V1CertificateSigningRequest;
      try {
        csr = await certificates.readCertificateSigningRequest({ name });
      } catch (err) {
        throw new Error(`cannot read the CSR ${name} (HTTP ${statusCode(err) ?? 'n/a'})`, { cause: err });
      }
      const final = finalCondition(csr.status?.conditions ?? []);
      if (final) throw new Error(`the CSR ${name} was ${describeCondition(final)}`);
      const encoded = csr.status?.certificate;
      // client-node leaves `format: byte` fields as the base64 text of the JSON.
      if (encoded) return Buffer.from(encoded, 'base64').toString('utf8');
      await this.sleep(this.pollIntervalMs, signal);
    }
  }

  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    const { clock } = this.opts;
    return new Promise((resolve) => {
      const done = () => {
        clock.clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = clock.setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private async deleteQuietly(name: string): Promise<void> {
    try {
      await this.opts.certificates.deleteCertificateSigningRequest({ name });
    } catch (err) {
      // Best effort: the CSR cleaner of kube-controller-manager removes leftovers (1 h after
      // issuance, 24 h if pending), and a 404 means someone else already did.
      if (statusCode(err) !== 404) this.opts.logger.debug('could not delete the CSR', { csr: name, ...errorFields(err) });
    }
  }
}

/** `admiralty-kubelet-serving-<nodeName>-<6 hex>`, within the 253 characters of an object name. */
function csrName(nodeName: string): string {
  const suffix = randomBytes(3).toString('hex');
  const stem = `${CSR_NAME_PREFIX}${nodeName}`.slice(0, MAX_NAME_LENGTH - suffix.length - 1).replace(/[-.]+$/, '');
  return `${stem}-${suffix}`;
}

/** The `Denied` or `Failed` condition that ends a CSR for good, if any. */
function finalCondition(conditions: readonly V1CertificateSigningRequestCondition[]): V1CertificateSigningRequestCondition | undefined {
  return conditions.find((c) => (c.type === 'Denied' || c.type === 'Failed') && c.status === 'True');
}

function describeCondition(c: V1CertificateSigningRequestCondition): string {
  // A Failed condition with reason SignerValidationFailure means the request shape was refused.
  const verb = c.type === 'Denied' ? 'denied' : 'not signed (Failed)';
  return `${verb}: ${c.reason ?? 'no reason'}${c.message ? `: ${c.message}` : ''}`;
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason;
}

/** Refuses a certificate that does not parse or is not for our key (it would fail every handshake). */
function checkMatchesKey(certPem: string, keyPem: string, name: string): { notAfter: Date } {
  let cert: X509Certificate;
  let matches: boolean;
  try {
    // Parses the first certificate of the PEM: the leaf of a chain.
    cert = new X509Certificate(certPem);
    matches = cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch (err) {
    throw new Error(`the certificate of the CSR ${name} cannot be parsed`, { cause: err });
  }
  if (!matches) throw new Error(`the certificate of the CSR ${name} is not for the key of the request`);
  return { notAfter: new Date(cert.validTo) };
}
