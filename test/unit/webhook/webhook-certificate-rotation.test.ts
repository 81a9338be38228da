import type { V1MutatingWebhookConfiguration, V1Secret } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { CertKeyPair } from '../../../certs/cert-types.js';
import { readCertificate } from '../../../certs/read-certificate.js';
import { verifySignedBy } from '../../../certs/verify-signed-by.js';
import { FakeClock } from '../../../provider/core/clock.js';
import { ProxySchedulerClientCertificate, type ProxySchedulerClientCertificateOptions } from '../../../webhook/proxy-scheduler-client-certificate.js';
import { WebhookCertificateRotation } from '../../../webhook/webhook-certificate-rotation.js';
import { WebhookCertificates, type WebhookCertificatesOptions } from '../../../webhook/webhook-certificates.js';
import { bareApiError } from '../../support/api-errors.js';

const MINUTE_MS = 60 * 1000;
const HOUR_MS = 60 * MINUTE_MS;
const NS = 'admiralty';
const CONFIG = 'admiralty';
/** How long the kubelet and client-go take to put a renewed client certificate in use (at most). */
const CLIENT_PROPAGATION_MS = 2 * MINUTE_MS;

/** Secrets by name with resourceVersion checks, and one MutatingWebhookConfiguration patched by JSON patch. */
function fakeApis() {
  const secrets = new Map<string, V1Secret>();
  const faults = { patchFails: false };
  let version = 0;
  const core = {
    readNamespacedSecret: async ({ name }: { name: string }) => {
      const s = secrets.get(name);
      if (!s) throw bareApiError(404, 'NotFound');
      return structuredClone(s);
    },
    createNamespacedSecret: async ({ body }: { body: V1Secret }) => {
      if (secrets.has(body.metadata!.name!)) throw bareApiError(409, 'AlreadyExists');
      secrets.set(body.metadata!.name!, { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++version) } });
    },
    replaceNamespacedSecret: async ({ name, body }: { name: string; body: V1Secret }) => {
      if (body.metadata?.resourceVersion !== secrets.get(name)?.metadata?.resourceVersion) throw bareApiError(409, 'Conflict');
      secrets.set(name, { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++version) } });
    },
  };
  let config: V1MutatingWebhookConfiguration = {
    metadata: { name: CONFIG },
    webhooks: [{ name: 'proxypods.multicluster.admiralty.io', clientConfig: {}, admissionReviewVersions: ['v1'], sideEffects: 'None' }],
  };
  const admissionRegistration = {
    readMutatingWebhookConfiguration: async () => structuredClone(config),
    patchMutatingWebhookConfiguration: async ({ body }: { body: { op: string; path: string; value: string }[] }) => {
      if (faults.patchFails) throw bareApiError(500, 'InternalError');
      const next = structuredClone(config);
      for (const op of body) {
        const [, , index, field, key] = op.path.split('/');
        const webhook = next.webhooks![Number(index)]!;
        if (op.op === 'test' && webhook.name !== op.value) throw bareApiError(422, 'Invalid');
        if (op.op === 'add' && field === 'clientConfig' && key === 'caBundle') webhook.clientConfig.caBundle = op.value;
      }
      config = next;
    },
  };
  const caBundle = () => splitPems(Buffer.from(config.webhooks![0]!.clientConfig.caBundle ?? '', 'base64').toString('utf8'));
  const clientCert = () => {
    const s = secrets.get('admiralty-proxy-scheduler-client');
    return s && Buffer.from(s.data!['tls.crt']!, 'base64').toString('utf8');
  };
  return { core, admissionRegistration, caBundle, clientCert, faults };
}

function splitPems(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

const signedByOneOf = (certPem: string, caPems: readonly string[]) => caPems.some((ca) => verifySignedBy(certPem, ca));

/** One provider replica: its own objects over the shared APIs, and what its server serves. */
function replica(name: string, apis: ReturnType<typeof fakeApis>, clock: FakeClock) {
  const state = { name, served: undefined as CertKeyPair | undefined, trusted: [] as readonly string[], errors: [] as string[], apiDown: false };
  // This replica's view of the API: reads fail while `apiDown`.
  const core = {
    ...apis.core,
    readNamespacedSecret: async (args: { name: string }) => {
      if (state.apiDown) throw bareApiError(503, 'ServiceUnavailable');
      return apis.core.readNamespacedSecret(args);
    },
  };
  const certs = new WebhookCertificates({
    core: core as unknown as WebhookCertificatesOptions['core'],
    admissionRegistration: apis.admissionRegistration as unknown as WebhookCertificatesOptions['admissionRegistration'],
    namespace: NS,
    secretName: 'admiralty-webhook-cert',
    dnsNames: ['admiralty.admiralty.svc'],
    clock,
    caValidityDays: 3,
    servingValidityDays: 1,
  });
  const clientCertificate = new ProxySchedulerClientCertificate({
    core: core as unknown as ProxySchedulerClientCertificateOptions['core'],
    namespace: NS,
    secretName: 'admiralty-proxy-scheduler-client',
    commonName: 'admiralty-proxy-scheduler',
    clock,
    validityDays: 1,
  });
  const rotation = new WebhookCertificateRotation({
    certs,
    webhookConfigName: CONFIG,
    clientCertificate,
    clock,
    serve: (pair, trusted) => {
      state.served = pair;
      state.trusted = trusted;
    },
    onError: (what, err) => state.errors.push(`${what}: ${(err as Error).message}`),
  });
  return {
    state,
    rotation,
    async start() {
      const first = await rotation.start();
      state.served = first.pair;
      state.trusted = first.trustedCaPems;
    },
  };
}

/** Lets the promise chains started by fired timers run to completion. */
async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('webhook: WebhookCertificateRotation, two replicas through a CA rotation (fake clock)', () => {
  it('keeps every replica callable by the apiserver and the proxy scheduler, then trims the old CA', async function () {
    this.timeout(30_000);
    const start = Date.UTC(2030, 5, 1);
    const clock = new FakeClock(start);
    const apis = fakeApis();
    const a = replica('a', apis, clock);
    const b = replica('b', apis, clock);
    await a.start();
    // b starts 2 minutes later, so its rechecks (every 5 minutes) lag a's.
    clock.advance(2 * MINUTE_MS);
    await b.start();
    const firstCa = apis.caBundle();
    expect(firstCa).to.have.length(1);

    /** The client certificates the scheduler may present now: the Secret's, and the one before it while it propagates. */
    const clientHistory: { atMs: number; certPem: string }[] = [];
    const presentedClientCerts = () => clientHistory.filter((c, i) => i === clientHistory.length - 1 || clientHistory[i + 1]!.atMs + CLIENT_PROPAGATION_MS > clock.now()).map((c) => c.certPem);
    const checkInvariants = (when: string) => {
      const current = apis.clientCert()!;
      if (clientHistory.at(-1)?.certPem !== current) clientHistory.push({ atMs: clock.now(), certPem: current });
      for (const r of [a, b]) {
        // The apiserver verifies the served certificate against the caBundle.
        expect(signedByOneOf(r.state.served!.certPem, apis.caBundle()), `${when}: ${r.state.name}'s serving cert is trusted by the caBundle`).to.equal(true);
        // The replica verifies the scheduler's client certificate against its trusted CAs.
        for (const presented of presentedClientCerts()) {
          expect(signedByOneOf(presented, r.state.trusted), `${when}: ${r.state.name} trusts the proxy scheduler's client certificate`).to.equal(true);
        }
      }
    };

    // Up to shortly before the CA is due (2/3 of its 3 days), through serving renewals.
    const caDueAt = readCertificate(firstCa[0] + '\n').notBefore.getTime() + Math.floor((3 * 24 * HOUR_MS + 5 * MINUTE_MS) * (2 / 3));
    while (clock.now() < caDueAt - 30 * MINUTE_MS) {
      clock.advance(37 * MINUTE_MS);
      await flush();
      checkInvariants(`${(clock.now() - start) / HOUR_MS} h`);
    }
    expect(apis.caBundle()).to.deep.equal(firstCa);

    // Minute by minute through the rotation and the retention of the old CA (20 minutes). The
    // replicas share the serving certificate, so they renew and recheck in step; b cannot read
    // the Secret from just before the CA is due until 6 minutes after a rotated it, so a rotates alone and b
    // goes on serving the old CA's certificate meanwhile.
    const laggard = b;
    let sawBoth = false;
    let rotatedAt = 0;
    for (let minute = 0; minute < 90; minute++) {
      laggard.state.apiDown = clock.now() >= caDueAt - 2 * MINUTE_MS && (!rotatedAt || clock.now() < rotatedAt + 6 * MINUTE_MS);
      clock.advance(MINUTE_MS);
      await flush();
      checkInvariants(`minute ${minute}`);
      const bundle = apis.caBundle();
      if (bundle.length === 2) {
        sawBoth = true;
        rotatedAt ||= clock.now();
        // Appended: the new CA first, the previous still there.
        expect(bundle[1]).to.equal(firstCa[0]);
      }
    }
    expect(rotatedAt).to.be.greaterThan(0);
    expect(sawBoth, 'the caBundle held both CAs during the rotation').to.equal(true);
    // Trimmed: only the new CA is left anywhere, and the scheduler's certificate is of it.
    const [newCa] = apis.caBundle();
    expect(apis.caBundle()).to.have.length(1);
    expect(newCa).not.to.equal(firstCa[0]);
    for (const r of [a, b]) {
      expect(r.state.trusted.map((p) => p.trim())).to.deep.equal([newCa]);
      expect(verifySignedBy(r.state.served!.certPem, newCa!)).to.equal(true);
      if (r !== laggard) expect(r.state.errors, r.state.name).to.deep.equal([]);
    }
    expect(laggard.state.errors.length, 'the laggard retried').to.be.greaterThan(0);
    expect(verifySignedBy(apis.clientCert()!, newCa!)).to.equal(true);
    a.rotation.stop();
    b.rotation.stop();
  });

  it('keeps serving the previous certificate while the caBundle cannot be set to a new CA', async function () {
    this.timeout(20_000);
    const clock = new FakeClock(Date.UTC(2030, 5, 1));
    const apis = fakeApis();
    const a = replica('a', apis, clock);
    await a.start();
    const [firstCa] = apis.caBundle();
    apis.faults.patchFails = true;
    // Past the CA's renewal time (2 of its 3 days): close to it at once, then in recheck-sized steps.
    clock.advance(2 * 24 * HOUR_MS - 15 * MINUTE_MS);
    await flush();
    for (let i = 0; i < 12; i++) {
      clock.advance(5 * MINUTE_MS);
      await flush();
    }
    expect(
      a.state.errors.some((e) => /could not be set to the new CA/.test(e)),
      'refused to serve the new CA',
    ).to.equal(true);
    expect(verifySignedBy(a.state.served!.certPem, firstCa!)).to.equal(true);
    expect(apis.caBundle()).to.deep.equal([firstCa]);
    apis.faults.patchFails = false;
    for (let i = 0; i < 12; i++) {
      clock.advance(MINUTE_MS);
      await flush();
    }
    // The new CA is trusted, and only then served (the old one may have been trimmed meanwhile:
    // its retention ran out while the apiserver could not be told).
    const bundle = apis.caBundle();
    expect(bundle[0]).not.to.equal(firstCa);
    expect(verifySignedBy(a.state.served!.certPem, bundle[0]!)).to.equal(true);
    a.rotation.stop();
  });
});
