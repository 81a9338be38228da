import type { V1MutatingWebhookConfiguration, V1Secret } from '@kubernetes/client-node';
import { expect } from 'chai';
import sinon from 'sinon';
import { readCertificate } from '../../../certs/read-certificate.js';
import { verifySignedBy } from '../../../certs/verify-signed-by.js';
import { FakeClock } from '../../../provider/core/clock.js';
import { trustedCaPems, WebhookCertificates, type WebhookCertificatesOptions } from '../../../webhook/webhook-certificates.js';
import { fakeSecretStore } from './fake-secrets.js';
import { bareApiError } from '../../support/api-errors.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const NS = 'admiralty';
const NAME = 'admiralty-webhook-cert';
const DNS = ['admiralty.admiralty.svc', 'admiralty.admiralty.svc.cluster.local'];

const pem = (secret: V1Secret | undefined, key: string) => Buffer.from(secret!.data![key]!, 'base64').toString('utf8');

describe('webhook: WebhookCertificates', () => {
  let clock: FakeClock;
  let store: ReturnType<typeof fakeSecretStore>;
  const admissionRegistration = { readMutatingWebhookConfiguration: sinon.stub(), patchMutatingWebhookConfiguration: sinon.stub() };

  const make = (extra: Partial<WebhookCertificatesOptions> = {}) =>
    new WebhookCertificates({
      core: store.core as unknown as WebhookCertificatesOptions['core'],
      admissionRegistration: admissionRegistration as unknown as WebhookCertificatesOptions['admissionRegistration'],
      namespace: NS,
      secretName: NAME,
      dnsNames: DNS,
      ipAddresses: ['127.0.0.1'],
      clock,
      ...extra,
    });

  beforeEach(() => {
    clock = new FakeClock(Date.UTC(2030, 5, 1));
    store = fakeSecretStore(NS, NAME);
    admissionRegistration.readMutatingWebhookConfiguration.reset();
    admissionRegistration.patchMutatingWebhookConfiguration.reset();
  });

  it('creates the Secret with a CA and a serving cert when it is missing, then reuses it', async () => {
    const certs = make();
    const bundle = await certs.ensureServingCertificate();
    expect(store.core.createNamespacedSecret.callCount).to.equal(1);
    const secret = store.get()!;
    expect(secret.type).to.equal('kubernetes.io/tls');
    expect(Object.keys(secret.data!).sort()).to.deep.equal(['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
    expect(pem(secret, 'tls.crt')).to.equal(bundle.certPem);
    expect(verifySignedBy(bundle.certPem, bundle.caPem)).to.equal(true);
    const info = readCertificate(bundle.certPem);
    expect(info.dnsNames).to.deep.equal(DNS);
    expect(info.ipAddresses).to.deep.equal(['127.0.0.1']);

    const again = await certs.ensureServingCertificate();
    expect(again).to.deep.equal(bundle);
    expect(store.core.createNamespacedSecret.callCount).to.equal(1);
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(0);
  });

  it('regenerates the serving cert (keeping the CA) when the wanted SANs change', async () => {
    const first = await make().ensureServingCertificate();
    const second = await make({ dnsNames: ['other.admiralty.svc'] }).ensureServingCertificate();
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(1);
    expect(second.caPem).to.equal(first.caPem);
    expect(second.certPem).to.not.equal(first.certPem);
    expect(readCertificate(second.certPem).dnsNames).to.deep.equal(['other.admiralty.svc']);
    expect(verifySignedBy(second.certPem, first.caPem)).to.equal(true);
    expect(pem(store.get(), 'tls.crt')).to.equal(second.certPem);
  });

  it('regenerates the serving cert once 2/3 of its lifetime has passed, and the CA too when that is near expiry', async () => {
    const certs = make({ servingValidityDays: 30, caValidityDays: 90 });
    const first = await certs.ensureServingCertificate();
    clock.advance(19 * DAY_MS);
    expect(await certs.ensureServingCertificate()).to.deep.equal(first);
    clock.advance(2 * DAY_MS);
    const renewed = await certs.ensureServingCertificate();
    expect(renewed.certPem).to.not.equal(first.certPem);
    expect(renewed.caPem).to.equal(first.caPem);
    clock.advance(40 * DAY_MS);
    const newCa = await certs.ensureServingCertificate();
    expect(newCa.caPem).to.not.equal(first.caPem);
    expect(verifySignedBy(newCa.certPem, newCa.caPem)).to.equal(true);
  });

  it('keeps the replaced CA as ca-previous.crt for the retention period, then trims it', async () => {
    const certs = make({ servingValidityDays: 30, caValidityDays: 90, previousCaRetentionMs: 20 * 60 * 1000 });
    const first = await certs.ensureServingCertificate();
    expect(first.previousCaPems).to.deep.equal([]);
    expect(trustedCaPems(first)).to.deep.equal([first.caPem]);
    clock.advance(61 * DAY_MS);
    const rotated = await certs.ensureServingCertificate();
    expect(rotated.caPem).to.not.equal(first.caPem);
    expect(rotated.previousCaPems).to.deep.equal([first.caPem]);
    expect(rotated.caRotatedAtMs).to.equal(clock.now());
    expect(trustedCaPems(rotated)).to.deep.equal([rotated.caPem, first.caPem]);
    const secret = store.get()!;
    expect(pem(secret, 'ca-previous.crt')).to.equal(first.caPem);
    expect(secret.metadata!.annotations!['multicluster.admiralty.io/ca-rotated-at']).to.equal(new Date(clock.now()).toISOString());
    // Another replica reading the Secret meanwhile sees the same set, without writing.
    clock.advance(19 * 60 * 1000);
    const replaces = store.core.replaceNamespacedSecret.callCount;
    expect(await make({ servingValidityDays: 30, caValidityDays: 90, previousCaRetentionMs: 20 * 60 * 1000 }).ensureServingCertificate()).to.deep.equal(rotated);
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(replaces);
    clock.advance(60 * 1000);
    const trimmed = await certs.ensureServingCertificate();
    expect(trimmed).to.deep.equal({ ...rotated, previousCaPems: [], caRotatedAtMs: undefined });
    expect(store.get()!.data).not.to.have.property('ca-previous.crt');
    expect(store.get()!.metadata!.annotations ?? {}).not.to.have.property('multicluster.admiralty.io/ca-rotated-at');
  });

  it('drops a previous CA that has expired, even within the retention period', async () => {
    const certs = make({ servingValidityDays: 1, caValidityDays: 3, previousCaRetentionMs: 10 * DAY_MS });
    const first = await certs.ensureServingCertificate();
    clock.advance(2 * DAY_MS + 60 * 60 * 1000);
    expect((await certs.ensureServingCertificate()).previousCaPems).to.deep.equal([first.caPem]);
    clock.advance(DAY_MS);
    expect((await certs.ensureServingCertificate()).previousCaPems).to.deep.equal([]);
  });

  it('replaces a serving cert that the CA did not sign', async () => {
    const first = await make().ensureServingCertificate();
    // A serving cert from another CA, stored next to the first CA.
    const elsewhere = fakeSecretStore(NS, NAME);
    await make({ core: elsewhere.core as unknown as WebhookCertificatesOptions['core'] }).ensureServingCertificate();
    const secret = store.get()!;
    const foreign = { 'tls.crt': elsewhere.get()!.data!['tls.crt']!, 'tls.key': elsewhere.get()!.data!['tls.key']! };
    store.set({ ...secret, data: { ...secret.data, ...foreign } });
    const repaired = await make().ensureServingCertificate();
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(1);
    expect(repaired.caPem).to.equal(first.caPem);
    expect(repaired.certPem).to.not.equal(pem(elsewhere.get(), 'tls.crt'));
    expect(verifySignedBy(repaired.certPem, first.caPem)).to.equal(true);
  });

  it('uses the Secret another replica created first (409 on create)', async () => {
    const theirs = await make().ensureServingCertificate();
    const secret = store.get();
    // Our first read misses; by the time we create, theirs exists.
    store.core.readNamespacedSecret.onCall(store.core.readNamespacedSecret.callCount).rejects(bareApiError(404, 'NotFound'));
    store.core.createNamespacedSecret.resetHistory();
    const ours = await make().ensureServingCertificate();
    expect(store.core.createNamespacedSecret.callCount).to.equal(1);
    expect(await store.core.createNamespacedSecret.firstCall.returnValue.catch((e: { code: number }) => e.code)).to.equal(409);
    expect(ours).to.deep.equal(theirs);
    expect(store.get()).to.deep.equal(secret);
  });

  it('re-reads and re-evaluates after a conflicting update', async () => {
    await make().ensureServingCertificate();
    // Another replica writes the same repair between our read and our replace.
    store.core.readNamespacedSecret.onCall(store.core.readNamespacedSecret.callCount).callsFake(async () => {
      const snapshot = structuredClone(store.get()!);
      await make({ dnsNames: ['new.admiralty.svc'] }).ensureServingCertificate();
      return snapshot;
    });
    const result = await make({ dnsNames: ['new.admiralty.svc'] }).ensureServingCertificate();
    const replaceResults = await Promise.all(
      store.core.replaceNamespacedSecret.getCalls().map((c) =>
        c.returnValue.then(
          () => 'ok',
          (e: { code: number }) => e.code,
        ),
      ),
    );
    // The other replica's write succeeded, ours got 409; then we took theirs instead of writing again.
    expect(replaceResults).to.deep.equal(['ok', 409]);
    expect(result.certPem).to.equal(pem(store.get(), 'tls.crt'));
    expect(readCertificate(result.certPem).dnsNames).to.deep.equal(['new.admiralty.svc']);
  });

  it('patches only the webhooks whose caBundle differs, guarded by test ops', async () => {
    const caPem = '-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n';
    const b64 = Buffer.from(caPem).toString('base64');
    const config: V1MutatingWebhookConfiguration = {
      metadata: { name: 'admiralty' },
      webhooks: [
        { name: 'ok.multicluster.admiralty.io', clientConfig: { caBundle: b64 }, admissionReviewVersions: ['v1'], sideEffects: 'None' },
        { name: 'stale.multicluster.admiralty.io', clientConfig: { caBundle: 'b2xk', service: { name: 's', namespace: NS } }, admissionReviewVersions: ['v1'], sideEffects: 'None' },
        { name: 'empty.multicluster.admiralty.io', clientConfig: { service: { name: 's', namespace: NS } }, admissionReviewVersions: ['v1'], sideEffects: 'None' },
      ],
    };
    admissionRegistration.readMutatingWebhookConfiguration.resolves(config);
    admissionRegistration.patchMutatingWebhookConfiguration.resolves(config);
    expect(await make().ensureCaBundle('admiralty', caPem)).to.equal(2);
    expect(admissionRegistration.readMutatingWebhookConfiguration.firstCall.args[0]).to.deep.equal({ name: 'admiralty' });
    expect(admissionRegistration.patchMutatingWebhookConfiguration.firstCall.args[0]).to.deep.equal({
      name: 'admiralty',
      body: [
        { op: 'test', path: '/webhooks/1/name', value: 'stale.multicluster.admiralty.io' },
        { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: b64 },
        { op: 'test', path: '/webhooks/2/name', value: 'empty.multicluster.admiralty.io' },
        { op: 'add', path: '/webhooks/2/clientConfig/caBundle', value: b64 },
      ],
    });

    admissionRegistration.patchMutatingWebhookConfiguration.resetHistory();
    admissionRegistration.readMutatingWebhookConfiguration.resolves({ ...config, webhooks: [config.webhooks![0]] });
    expect(await make().ensureCaBundle('admiralty', caPem)).to.equal(0);
    expect(admissionRegistration.patchMutatingWebhookConfiguration.called).to.equal(false);
  });
});
