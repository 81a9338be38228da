import { expect } from 'chai';
import { ELECT_ANNOTATION } from '../../../provider/core/keys.js';
import { AdmissionPool, type AbandonReason } from '../../../webhook/admission-pool.js';
import { answerReview } from '../../../webhook/answer-review.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';

const MISBEHAVING = new URL('./fixtures/misbehaving-admission-worker.ts', import.meta.url);

function review(uid: string, annotations: Record<string, string> = {}, tolerations = 1): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      operation: 'CREATE',
      namespace: 'ns',
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: uid, namespace: 'ns', annotations },
        spec: { containers: [{ name: 'c', image: 'x' }], tolerations: Array.from({ length: tolerations }, (_, i) => ({ key: `k${i}`, operator: 'Exists' })) },
      },
    },
  });
}

const responseOf = (reply: { answer: unknown }) => (reply.answer as { json?: { response?: { uid?: string; allowed?: boolean; status?: { code?: number; message?: string } } } }).json?.response;

describe('AdmissionPool', function () {
  // Workers load TypeScript through tsx here: a cold start takes a second or two on a busy machine.
  this.timeout(30_000);
  const pools: AdmissionPool[] = [];
  const poolWith = (opts: ConstructorParameters<typeof AdmissionPool>[0]) => {
    const pool = new AdmissionPool(opts);
    pools.push(pool);
    return pool;
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()));
  });

  it('answers a review in its worker exactly as answerReview does on the main thread', async () => {
    const pool = poolWith({ workerData: { proxySchedulerName: 'admiralty-proxy' }, deadlineMs: 20_000 });
    const raw = review('u1', { [ELECT_ANNOTATION]: '' });
    const inProcess = answerReview(raw, (pod, namespace) => mutatePod(pod, { namespace, schedulerName: 'admiralty-proxy' }));
    expect(await pool.review(raw)).to.deep.equal(inProcess);
    expect(responseOf(inProcess)?.allowed).to.equal(true);
  });

  it('denies an elected pod over the toleration limit in its worker, with the message that names the field', async () => {
    const pool = poolWith({ deadlineMs: 20_000 });
    const response = responseOf(await pool.review(review('u2', { [ELECT_ANNOTATION]: '' }, 6000)));
    expect(response).to.include({ uid: 'u2', allowed: false });
    expect(response?.status?.message).to.match(/spec\.tolerations/);
  });

  it('denies a review that overruns its deadline with an AdmissionReview for its uid, replaces the worker, and answers the next review', async () => {
    const abandoned: AbandonReason[] = [];
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 1000, onAbandoned: (r) => abandoned.push(r) });
    // Warm: the deadline below must not be spent loading the worker.
    expect(responseOf(await pool.review(review('warm')))?.allowed).to.equal(true);
    const reply = await pool.review(review('spins', { 'test/mode': 'spin' }));
    expect(reply.answer.status).to.equal(200);
    expect(responseOf(reply)).to.deep.include({ uid: 'spins', allowed: false });
    expect(responseOf(reply)?.status?.message).to.match(/took longer than 1s/);
    expect(abandoned).to.deep.equal(['deadline']);
    expect(responseOf(await pool.review(review('after')))).to.include({ uid: 'after', allowed: true });
    expect(pool.workers).to.equal(1);
  });

  it('keeps the main event loop free while a worker spins: a timer fires before the stuck review is answered', async () => {
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 1000 });
    await pool.review(review('warm'));
    const order: string[] = [];
    const answered = pool.review(review('spins', { 'test/mode': 'spin' })).then(() => order.push('answered'));
    await new Promise((r) => setTimeout(r, 200));
    order.push('timer');
    await answered;
    expect(order).to.deep.equal(['timer', 'answered']);
  });

  it('denies the review of a worker that exits mid-review (worker_exit) and answers the next one with a new worker', async () => {
    const abandoned: AbandonReason[] = [];
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 20_000, onAbandoned: (r) => abandoned.push(r) });
    const reply = await pool.review(review('exits', { 'test/mode': 'exit' }));
    expect(responseOf(reply)).to.include({ uid: 'exits', allowed: false });
    expect(responseOf(reply)?.status?.message).to.match(/admission worker stopped/);
    expect(abandoned).to.deep.equal(['worker_exit']);
    expect(responseOf(await pool.review(review('after')))).to.include({ uid: 'after', allowed: true });
  });

  it('denies the review of a worker that runs out of its heap limit and answers the next one', async () => {
    const abandoned: AbandonReason[] = [];
    const errors: unknown[] = [];
    const pool = poolWith({
      workerUrl: MISBEHAVING,
      deadlineMs: 25_000,
      resourceLimits: { maxOldGenerationSizeMb: 48 },
      onAbandoned: (r) => abandoned.push(r),
      onWorkerError: (e) => errors.push(e),
    });
    const reply = await pool.review(review('hogs', { 'test/mode': 'hog' }));
    expect(responseOf(reply)).to.include({ uid: 'hogs', allowed: false });
    expect(abandoned).to.deep.equal(['worker_exit']);
    expect(errors.map(String).join('\n')).to.match(/memory|exited/i);
    expect(responseOf(await pool.review(review('after')))).to.include({ uid: 'after', allowed: true });
  });

  it('answers 503 at once, as queue_full, to a review that finds the queue full by count', async () => {
    const abandoned: AbandonReason[] = [];
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 1000, maxQueued: 1, onAbandoned: (r) => abandoned.push(r) });
    await pool.review(review('warm'));
    const stuck = pool.review(review('spins', { 'test/mode': 'spin' }));
    const queued = pool.review(review('queued'));
    const refused = await pool.review(review('refused'));
    expect(refused.answer).to.deep.include({ status: 503 });
    expect(abandoned).to.deep.equal(['queue_full']);
    await stuck;
    // The queued review waited behind the stuck one, and its deadline counts from its arrival:
    // it expires with it, before a worker could tell its uid.
    expect((await queued).answer).to.deep.include({ status: 503 });
    expect(abandoned).to.deep.equal(['queue_full', 'deadline', 'deadline']);
  });

  it('refuses a review that would take the queue past its characters, before holding it', async () => {
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 1000, maxQueuedChars: 1000 });
    await pool.review(review('warm'));
    const stuck = pool.review(review('spins', { 'test/mode': 'spin' }));
    const refused = await pool.review(review('big', {}, 100));
    expect(refused.answer).to.deep.include({ status: 503 });
    await stuck;
  });

  it('answers a review still queued at its deadline with 503 (no uid is known yet)', async () => {
    const abandoned: AbandonReason[] = [];
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 1000, onAbandoned: (r) => abandoned.push(r) });
    await pool.review(review('warm'));
    const stuck = pool.review(review('spins', { 'test/mode': 'spin' }));
    const queued = await pool.review(review('queued'));
    await stuck;
    expect(queued.answer).to.deep.include({ status: 503 });
    expect(abandoned).to.deep.equal(['deadline', 'deadline']);
  });

  it('on close, answers what is pending as closed and refuses new reviews', async () => {
    const abandoned: AbandonReason[] = [];
    const pool = poolWith({ workerUrl: MISBEHAVING, deadlineMs: 20_000, onAbandoned: (r) => abandoned.push(r) });
    await pool.review(review('warm'));
    const stuck = pool.review(review('spins', { 'test/mode': 'spin' }));
    await new Promise((r) => setTimeout(r, 100));
    await pool.close();
    expect(responseOf(await stuck)).to.include({ uid: 'spins', allowed: false });
    expect((await pool.review(review('late'))).answer).to.deep.include({ status: 503 });
    expect(abandoned).to.deep.equal(['closed', 'closed']);
    expect(pool.workers).to.equal(0);
  });
});
