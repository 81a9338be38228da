import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { classifyApiError, isAlreadyExists } from '../../../../provider/core/errors.js';
import { identityAnswer, unreadAnswer } from '../../../../provider/core/unread-answer.js';

describe('unreadAnswer', () => {
  // An apiserver stand-in: answers each request with the next scripted answer, and records what it got.
  let server: Server;
  let port: number;
  let answers: { status: number; body: unknown }[] = [];
  let received: { method?: string; url?: string; contentType?: string; body: string }[] = [];
  before(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ method: req.method, url: req.url, contentType: req.headers['content-type'], body });
        const answer = answers.shift() ?? { status: 500, body: {} };
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    port = (server.address() as { port: number }).port;
  });
  beforeEach(() => {
    answers = [];
    received = [];
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((res) => server.close(res));
  });

  function core(): CoreV1Api {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc.makeApiClient(CoreV1Api);
  }

  const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ns', uid: 'u1', resourceVersion: '7' }, spec: { containers: [{ name: 'c', image: 'nginx' }] } };
  const status = (code: number, reason: string) => ({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code, message: `${reason} (test)` });

  it('sends the call as it is, and resolves without deserializing the answer (an empty object)', async () => {
    answers = [
      { status: 201, body: pod },
      { status: 201, body: pod },
    ];
    const unread = await core().createNamespacedPod({ namespace: 'ns', body: pod }, unreadAnswer());
    const read = await core().createNamespacedPod({ namespace: 'ns', body: pod });
    expect(received.map((r) => [r.method, r.url])).to.deep.equal([
      ['POST', '/api/v1/namespaces/ns/pods'],
      ['POST', '/api/v1/namespaces/ns/pods'],
    ]);
    expect(received[0]!.body).to.equal(received[1]!.body);
    expect(read.metadata?.name).to.equal('p');
    expect(unread.metadata).to.equal(undefined);
  });

  it('answers with who the created object is, and nothing more', async () => {
    const created = { ...pod, metadata: { ...pod.metadata, creationTimestamp: '2026-11-24T10:00:00Z', labels: { a: 'b' } }, status: { phase: 'Pending' } };
    answers = [{ status: 201, body: created }];
    const who = await core().createNamespacedPod({ namespace: 'ns', body: pod }, identityAnswer());
    expect(who).to.deep.equal({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ns', uid: 'u1', resourceVersion: '7' } });
    expect(JSON.parse(received[0]!.body)).to.deep.equal(pod);
    answers = [{ status: 409, body: status(409, 'AlreadyExists') }];
    const exists = await core()
      .createNamespacedPod({ namespace: 'ns', body: pod }, identityAnswer())
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isAlreadyExists(exists)).to.equal(true);
  });

  it('keeps the Status of a failure, so that errors classify as without it', async () => {
    answers = [
      { status: 409, body: status(409, 'AlreadyExists') },
      { status: 404, body: status(404, 'NotFound') },
      { status: 409, body: status(409, 'Conflict') },
    ];
    const failure = (p: Promise<unknown>) =>
      p.then(
        () => expect.fail('succeeded'),
        (e: unknown) => e,
      );
    const exists = await failure(core().createNamespacedPod({ namespace: 'ns', body: pod }, unreadAnswer()));
    expect(isAlreadyExists(exists)).to.equal(true);
    expect(classifyApiError(await failure(core().createNamespacedEvent({ namespace: 'gone', body: { metadata: { name: 'e' }, involvedObject: {} } }, unreadAnswer())))).to.equal('NotFound');
    const conflict = await failure(core().patchNamespacedPodStatus({ name: 'p', namespace: 'ns', body: {} }, unreadAnswer(setHeaderOptions('Content-Type', PatchStrategy.MergePatch))));
    expect(classifyApiError(conflict)).to.equal('Conflict');
    answers = [{ status: 404, body: status(404, 'NotFound') }];
    expect(classifyApiError(await failure(core().deleteNamespacedPod({ name: 'p', namespace: 'ns' }, unreadAnswer())))).to.equal('NotFound');
  });

  it('answers a delete that succeeds (200 with the object, 202 while it terminates) with an empty object', async () => {
    answers = [
      { status: 200, body: pod },
      { status: 202, body: pod },
    ];
    for (let i = 0; i < 2; i++) expect((await core().deleteNamespacedPod({ name: 'p', namespace: 'ns', body: { preconditions: { uid: 'u1' } } }, unreadAnswer())).metadata).to.equal(undefined);
    expect(received.map((r) => [r.method, JSON.parse(r.body).preconditions.uid])).to.deep.equal([
      ['DELETE', 'u1'],
      ['DELETE', 'u1'],
    ]);
  });

  it('adds to other options: a patch keeps its Content-Type', async () => {
    answers = [{ status: 200, body: pod }];
    const patched = await core().patchNamespacedPodStatus(
      { name: 'p', namespace: 'ns', body: { status: { phase: 'Running' } } },
      unreadAnswer(setHeaderOptions('Content-Type', PatchStrategy.MergePatch)),
    );
    expect(received[0]!.contentType).to.equal(PatchStrategy.MergePatch);
    expect(JSON.parse(received[0]!.body)).to.deep.equal({ status: { phase: 'Running' } });
    expect(patched.metadata).to.equal(undefined);
  });
});
