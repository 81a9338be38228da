import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { createCA } from '../../../certs/create-ca.js';
import { readCertificate } from '../../../certs/read-certificate.js';
import { verifySignedBy } from '../../../certs/verify-signed-by.js';
import { FakeClock } from '../../../provider/core/clock.js';
import { ProxySchedulerClientCertificate, type ProxySchedulerClientCertificateOptions } from '../../../webhook/proxy-scheduler-client-certificate.js';
import { fakeSecretStore } from './fake-secrets.js';
import { bareApiError } from '../../support/api-errors.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const NS = 'admiralty';
const NAME = 'admiralty-proxy-scheduler-client';
const CN = 'admiralty-proxy-scheduler';

describe('webhook: ProxySchedulerClientCertificate', () => {
  const start = Date.UTC(2030, 5, 1);
  const ca = createCA({ commonName: 'admiralty-webhook-cert-ca', now: start });
  const nextCa = createCA({ commonName: 'admiralty-webhook-cert-ca', now: start });
  let clock: FakeClock;
  let store: ReturnType<typeof fakeSecretStore>;
  const make = () =>
    new ProxySchedulerClientCertificate({ core: store.core as unknown as ProxySchedulerClientCertificateOptions['core'], namespace: NS, secretName: NAME, commonName: CN, clock, validityDays: 30 });

  beforeEach(() => {
    clock = new FakeClock(start);
    store = fakeSecretStore(NS, NAME);
  });

  it('creates a kubernetes.io/tls Secret with a clientAuth certificate of the CA, then reuses it', async () => {
    const pair = await make().ensure(ca);
    const secret = store.get()!;
    expect(secret.type).to.equal('kubernetes.io/tls');
    expect(Object.keys(secret.data!).sort()).to.deep.equal(['tls.crt', 'tls.key']);
    expect(verifySignedBy(pair.certPem, ca.certPem)).to.equal(true);
    expect(readCertificate(pair.certPem).subjectCommonName).to.equal(CN);
    const x = new X509Certificate(pair.certPem);
    expect(x.keyUsage).to.deep.equal(['1.3.6.1.5.5.7.3.2']);
    expect(x.ca).to.equal(false);
    expect(await make().ensure(ca)).to.deep.equal(pair);
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(0);
  });

  it('renews once 2/3 of the lifetime has passed', async () => {
    const first = await make().ensure(ca);
    clock.advance(19 * DAY_MS);
    expect(await make().ensure(ca)).to.deep.equal(first);
    clock.advance(2 * DAY_MS);
    const renewed = await make().ensure(ca);
    expect(renewed.certPem).not.to.equal(first.certPem);
    expect(readCertificate(renewed.certPem).notAfter.getTime()).to.equal(start + 51 * DAY_MS);
  });

  it('reissues from a new CA', async () => {
    await make().ensure(ca);
    const moved = await make().ensure(nextCa);
    expect(verifySignedBy(moved.certPem, nextCa.certPem)).to.equal(true);
    expect(verifySignedBy(moved.certPem, ca.certPem)).to.equal(false);
  });

  it('replaces a stored pair that is garbage or whose key does not match', async () => {
    const first = await make().ensure(ca);
    const other = await make().ensure(nextCa);
    const secret = store.get()!;
    secret.data!['tls.key'] = Buffer.from(first.keyPem).toString('base64');
    const fixed = await make().ensure(nextCa);
    expect(fixed.certPem).not.to.equal(other.certPem);
    expect(store.core.replaceNamespacedSecret.callCount).to.equal(2);
  });

  it('uses the certificate another replica wrote first (409 on create)', async () => {
    const theirs = await make().ensure(ca);
    store.core.readNamespacedSecret.onCall(store.core.readNamespacedSecret.callCount).rejects(bareApiError(404, 'NotFound'));
    expect(await make().ensure(ca)).to.deep.equal(theirs);
    expect(store.core.createNamespacedSecret.callCount).to.equal(2);
  });
});
