import { expect } from 'chai';
import sinon from 'sinon';
import forge from 'node-forge';
import { ApiException, type V1CertificateSigningRequest, type V1CertificateSigningRequestCondition } from '@kubernetes/client-node';
import { createCA } from '../../../../certs/create-ca.js';
import { readCertificate } from '../../../../certs/read-certificate.js';
import type { CertKeyPair } from '../../../../certs/cert-types.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import type { Logger } from '../../../../provider/core/logger.js';
import { KubeletServingCertificate, SELF_APPROVAL_REASON, type CsrClient, type KubeletServingCertificateOptions } from '../../../../provider/kubelet/serving-certificate.js';
import { notFound } from '../../../support/api-errors.js';

const START = Date.UTC(2030, 0, 1);
const POLL_MS = 500;
const TIMEOUT_MS = 5_000;

/** Lets promise chains started by the code under test (and fired fake timers) run. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Advances the fake clock one poll interval at a time until `p` settles. */
async function drive<T>(p: Promise<T>, clock: FakeClock, stepMs = POLL_MS, maxSteps = 1000): Promise<T> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < maxSteps; i++) {
    await flush();
    if (settled) break;
    clock.advance(stepMs);
  }
  return p;
}

const clone = <T>(o: T): T => structuredClone(o);

/** Signs a PKCS#10 request the way the kubelet-serving signer would (CA-signed, serverAuth). */
function signRequest(requestB64: string, ca: CertKeyPair, nowMs: number): string {
  const csr = forge.pki.certificationRequestFromPem(Buffer.from(requestB64, 'base64').toString('utf8'));
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const cert = forge.pki.createCertificate();
  cert.publicKey = csr.publicKey!;
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date(nowMs - 60_000);
  cert.validity.notAfter = new Date(nowMs + 365 * 24 * 3600 * 1000);
  cert.setSubject(csr.subject.attributes);
  cert.setIssuer(caCert.subject.attributes);
  const ext = (csr.getAttribute({ name: 'extensionRequest' }) as { extensions?: object[] } | null)?.extensions ?? [];
  cert.setExtensions([...ext, { name: 'extKeyUsage', serverAuth: true }]);
  cert.sign(forge.pki.privateKeyFromPem(ca.keyPem) as forge.pki.rsa.PrivateKey, forge.md.sha256.create());
  return forge.pki.certificateToPem(cert) + ca.certPem;
}

interface FakeApi {
  client: CsrClient;
  create: sinon.SinonStub;
  read: sinon.SinonStub;
  approve: sinon.SinonStub;
  del: sinon.SinonStub;
  /** The CSR as the fake apiserver holds it. */
  stored(): V1CertificateSigningRequest | undefined;
}

interface FakeApiBehaviour {
  /** Poll reads (after approval) that see no certificate before the signer fills it in; Infinity = never. */
  signAfterPolls?: number;
  /** Condition the CSR gets once approved (instead of being signed). */
  conditionAfterApproval?: V1CertificateSigningRequestCondition;
  /** Sign a different key than the requested one. */
  signWrongKey?: boolean;
  /** Someone deletes our CSR right after its creation and files their own under the same name. */
  replacedAfterCreate?: boolean;
}

let ca: CertKeyPair;

/** An in-memory CertificatesV1Api: holds one CSR, bumps resourceVersion, signs once approved. */
function fakeApi(clock: FakeClock, behaviour: FakeApiBehaviour = {}): FakeApi {
  let csr: V1CertificateSigningRequest | undefined;
  let pollsAfterApproval = 0;
  let approved = false;
  const signAfter = behaviour.signAfterPolls ?? 1;

  const create = sinon.stub().callsFake(async ({ body }: { body: V1CertificateSigningRequest }) => {
    csr = clone(body);
    csr.metadata = { ...csr.metadata, resourceVersion: '42', uid: 'u-1' };
    csr.status = {};
    const created = clone(csr);
    if (behaviour.replacedAfterCreate) {
      const theirs = forge.pki.certificationRequestToPem(wrongKeyRequest());
      csr = { ...clone(csr), metadata: { ...csr.metadata, uid: 'u-theirs', resourceVersion: '43' }, spec: { ...csr.spec, request: Buffer.from(theirs).toString('base64') } };
    }
    return created;
  });
  const read = sinon.stub().callsFake(async ({ name }: { name: string }) => {
    if (!csr || csr.metadata?.name !== name) throw notFound();
    if (approved) {
      pollsAfterApproval++;
      if (behaviour.conditionAfterApproval) {
        csr.status!.conditions = [...(csr.status!.conditions ?? []), behaviour.conditionAfterApproval];
      } else if (pollsAfterApproval > signAfter && !csr.status!.certificate) {
        const request = behaviour.signWrongKey ? forge.pki.certificationRequestToPem(wrongKeyRequest()) : Buffer.from(csr.spec.request, 'base64').toString('utf8');
        csr.status!.certificate = Buffer.from(signRequest(Buffer.from(request).toString('base64'), ca, clock.now())).toString('base64');
      }
    }
    return clone(csr);
  });
  const approve = sinon.stub().callsFake(async ({ name, body }: { name: string; body: V1CertificateSigningRequest }) => {
    if (!csr || csr.metadata?.name !== name) throw notFound();
    if (body.metadata?.resourceVersion !== csr.metadata?.resourceVersion) throw new ApiException(409, 'Conflict', '{}', {});
    csr.status = { ...csr.status, conditions: clone(body.status?.conditions ?? []) };
    csr.metadata!.resourceVersion = String(Number(csr.metadata!.resourceVersion) + 1);
    approved = true;
    return clone(csr);
  });
  const del = sinon.stub().callsFake(async ({ name }: { name: string }) => {
    if (!csr || csr.metadata?.name !== name) throw notFound();
    csr = undefined;
    return { kind: 'Status', status: 'Success' };
  });
  return {
    client: {
      createCertificateSigningRequest: create,
      readCertificateSigningRequest: read,
      replaceCertificateSigningRequestApproval: approve,
      deleteCertificateSigningRequest: del,
    } as unknown as CsrClient,
    create,
    read,
    approve,
    del,
    stored: () => csr,
  };
}

function wrongKeyRequest(): forge.pki.CertificateSigningRequest {
  const keys = forge.pki.rsa.generateKeyPair({ bits: 512, e: 0x10001 });
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = keys.publicKey;
  csr.setSubject([{ name: 'commonName', value: 'system:node:other' }]);
  csr.sign(keys.privateKey, forge.md.sha256.create());
  return csr;
}

function fakeLogger(): Logger & { warn: sinon.SinonStub; info: sinon.SinonStub; debug: sinon.SinonStub } {
  return { info: sinon.stub(), warn: sinon.stub(), debug: sinon.stub(), error: sinon.stub() } as never;
}

describe('provider/kubelet: KubeletServingCertificate', () => {
  let clock: FakeClock;
  let logger: ReturnType<typeof fakeLogger>;

  before(() => {
    ca = createCA({ commonName: 'kubernetes', now: START });
  });

  beforeEach(() => {
    clock = new FakeClock(START);
    logger = fakeLogger();
  });

  const make = (api: FakeApi, extra: Partial<KubeletServingCertificateOptions> = {}) =>
    new KubeletServingCertificate({
      certificates: api.client,
      nodeName: 'admiralty-c1',
      ipAddresses: ['10.0.0.7'],
      dnsNames: ['admiralty.admiralty.svc'],
      clock,
      logger,
      waitTimeoutMs: TIMEOUT_MS,
      pollIntervalMs: POLL_MS,
      ...extra,
    });

  const expectSelfSigned = (pair: { certPem: string; selfSigned: boolean }) => {
    expect(pair.selfSigned).to.equal(true);
    const info = readCertificate(pair.certPem);
    expect(info.subjectCommonName).to.equal('system:node:admiralty-c1');
    expect(info.issuerCommonName).to.equal('system:node:admiralty-c1');
    expect(info.ipAddresses).to.deep.equal(['10.0.0.7']);
    expect(info.dnsNames).to.deep.equal(['admiralty.admiralty.svc']);
    expect(logger.warn.calledOnce).to.equal(true);
    expect(logger.warn.firstCall.args[0])
      .to.match(/self-signed/)
      .and.to.match(/--kubelet-certificate-authority/);
  };

  it('files a kubelet-serving CSR, approves it, and returns the certificate that appears on the second poll', async () => {
    const api = fakeApi(clock, { signAfterPolls: 1 });
    const pair = await drive(make(api).issue(), clock);

    expect(pair.selfSigned).to.equal(false);
    // One read for the approval, then two polls: empty, then signed.
    expect(api.read.callCount).to.equal(3);
    expect(clock.now() - START).to.equal(POLL_MS);
    const info = readCertificate(pair.certPem);
    expect(info.subjectCommonName).to.equal('system:node:admiralty-c1');
    expect(info.issuerCommonName).to.equal('kubernetes');
    expect(info.ipAddresses).to.deep.equal(['10.0.0.7']);
    // The chain is returned as issued (leaf then CA), and the key is the one of the request.
    expect(pair.certPem.match(/BEGIN CERTIFICATE/g)).to.have.length(2);
    const leaf = forge.pki.certificateFromPem(pair.certPem) as forge.pki.Certificate & { publicKey: forge.pki.rsa.PublicKey };
    const key = forge.pki.privateKeyFromPem(pair.keyPem) as forge.pki.rsa.PrivateKey;
    expect(leaf.publicKey.n.equals(key.n)).to.equal(true);
    expect(logger.warn.called).to.equal(false);
    expect(clock.pending()).to.equal(0);
  });

  it('creates the CSR with the kubelet subject, SANs, signer, usages and lifetime', async () => {
    const api = fakeApi(clock);
    await drive(make(api).issue(), clock);

    const body = api.create.firstCall.args[0].body as V1CertificateSigningRequest;
    expect(body.metadata?.name).to.match(/^admiralty-kubelet-serving-admiralty-c1-[0-9a-f]{6}$/);
    expect(body.spec.signerName).to.equal('kubernetes.io/kubelet-serving');
    expect(body.spec.usages).to.deep.equal(['digital signature', 'key encipherment', 'server auth']);
    expect(body.spec.expirationSeconds).to.equal(365 * 24 * 3600);
    const request = forge.pki.certificationRequestFromPem(Buffer.from(body.spec.request, 'base64').toString('utf8'));
    expect(request.verify()).to.equal(true);
    expect(request.subject.getField('CN').value).to.equal('system:node:admiralty-c1');
    expect(request.subject.getField('O').value).to.equal('system:nodes');
    const ext = (request.getAttribute({ name: 'extensionRequest' }) as { extensions: Array<{ name: string; altNames: Array<{ type: number; value?: string; ip?: string }> }> }).extensions;
    const san = ext.find((e) => e.name === 'subjectAltName')!;
    expect(san.altNames.map((n) => [n.type, n.type === 7 ? n.ip : n.value])).to.deep.equal([
      [2, 'admiralty.admiralty.svc'],
      [7, '10.0.0.7'],
    ]);
  });

  it('passes a custom signer name (e.g. EKS) and lifetime through', async () => {
    const api = fakeApi(clock);
    await drive(make(api, { signerName: 'beta.eks.amazonaws.com/app-serving', expirationSeconds: 86_400 }).issue(), clock);
    const body = api.create.firstCall.args[0].body as V1CertificateSigningRequest;
    expect(body.spec.signerName).to.equal('beta.eks.amazonaws.com/app-serving');
    expect(body.spec.expirationSeconds).to.equal(86_400);
  });

  it('approves on the object it read: Approved condition appended, resourceVersion kept', async () => {
    const api = fakeApi(clock);
    await drive(make(api).issue(), clock);

    expect(api.approve.calledOnce).to.equal(true);
    const { name, body } = api.approve.firstCall.args[0] as { name: string; body: V1CertificateSigningRequest };
    expect(name).to.equal(api.create.firstCall.args[0].body.metadata.name);
    expect(body.metadata?.resourceVersion).to.equal('42');
    expect(body.metadata?.uid).to.equal('u-1');
    expect(body.spec.signerName).to.equal('kubernetes.io/kubelet-serving');
    const conditions = body.status?.conditions ?? [];
    expect(conditions).to.have.length(1);
    expect(conditions[0]).to.include({ type: 'Approved', status: 'True', reason: SELF_APPROVAL_REASON });
    expect(conditions[0]!.message).to.be.a('string').and.not.empty;
    expect(api.read.firstCall.calledBefore(api.approve.firstCall)).to.equal(true);
  });

  it('re-reads and retries the approval on a 409 conflict', async () => {
    const api = fakeApi(clock);
    // The first attempt loses a race; the default behaviour (the fake apiserver) serves the rest.
    api.approve.onFirstCall().rejects(new ApiException(409, 'Conflict', '{}', {}));
    const pair = await drive(make(api).issue(), clock);
    expect(pair.selfSigned).to.equal(false);
    expect(api.approve.callCount).to.equal(2);
  });

  it('deletes the CSR after success', async () => {
    const api = fakeApi(clock);
    await drive(make(api).issue(), clock);
    const name = api.create.firstCall.args[0].body.metadata.name;
    expect(api.del.calledOnce).to.equal(true);
    expect(api.del.firstCall.args[0]).to.deep.equal({ name });
    expect(api.stored()).to.equal(undefined);
  });

  it('still returns the signed certificate when the delete fails', async () => {
    const api = fakeApi(clock);
    api.del.rejects(new ApiException(500, 'boom', '{}', {}));
    const pair = await drive(make(api).issue(), clock);
    expect(pair.selfSigned).to.equal(false);
    expect(logger.warn.called).to.equal(false);
  });

  it('falls back to self-signed when the CSR is denied, without waiting for the timeout', async () => {
    const api = fakeApi(clock, {
      conditionAfterApproval: { type: 'Denied', status: 'True', reason: 'PolicyDenied', message: 'no virtual nodes here' },
    });
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(clock.now() - START).to.be.lessThan(TIMEOUT_MS);
    expect(logger.warn.firstCall.args[1].error).to.match(/denied: PolicyDenied/);
    expect(api.del.calledOnce).to.equal(true);
  });

  it('falls back to self-signed when the signer fails the request (SignerValidationFailure)', async () => {
    const api = fakeApi(clock, {
      conditionAfterApproval: { type: 'Failed', status: 'True', reason: 'SignerValidationFailure', message: 'invalid usages' },
    });
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(logger.warn.firstCall.args[1].error).to.match(/SignerValidationFailure/);
  });

  it('falls back to self-signed when no certificate appears within waitTimeoutMs, and deletes the CSR', async () => {
    const api = fakeApi(clock, { signAfterPolls: Infinity });
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(clock.now() - START).to.equal(TIMEOUT_MS);
    // One read for the approval, then one per poll interval up to the deadline.
    expect(api.read.callCount).to.equal(1 + TIMEOUT_MS / POLL_MS);
    await flush();
    expect(api.del.calledOnce).to.equal(true);
    expect(api.stored()).to.equal(undefined);
    expect(clock.pending()).to.equal(0);
  });

  it('falls back to self-signed at the deadline when an API call hangs', async () => {
    const api = fakeApi(clock);
    api.create.returns(new Promise(() => undefined));
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(clock.now() - START).to.equal(TIMEOUT_MS);
  });

  it('falls back to self-signed when creating the CSR is forbidden (403), without approving or deleting', async () => {
    const api = fakeApi(clock);
    api.create.rejects(new ApiException(403, 'Forbidden', '{"kind":"Status","reason":"Forbidden"}', {}));
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(clock.now()).to.equal(START);
    expect(logger.warn.firstCall.args[1].error).to.match(/HTTP 403/);
    expect(api.read.called).to.equal(false);
    expect(api.approve.called).to.equal(false);
    expect(api.del.called).to.equal(false);
  });

  it('falls back to self-signed when the approval is forbidden, and deletes the CSR', async () => {
    const api = fakeApi(clock);
    api.approve.rejects(new ApiException(403, 'Forbidden', '{}', {}));
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(api.del.calledOnce).to.equal(true);
  });

  it('never approves a CSR put in place of its own under the same name, and falls back to self-signed', async () => {
    const api = fakeApi(clock, { replacedAfterCreate: true });
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(api.approve.called).to.equal(false);
    expect(logger.warn.firstCall.args[1].error).to.match(/not the one the provider filed/);
  });

  it('falls back to self-signed when the issued certificate is not for the requested key', async () => {
    const api = fakeApi(clock, { signWrongKey: true });
    const pair = await drive(make(api).issue(), clock);
    expectSelfSigned(pair);
    expect(logger.warn.firstCall.args[1].error).to.match(/not for the key/);
  });

  it('rejects when even a self-signed certificate cannot be built (no SAN)', async () => {
    const api = fakeApi(clock);
    let error: unknown;
    await drive(make(api, { ipAddresses: [], dnsNames: [] }).issue(), clock).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(TypeError);
  });
});
