import { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { parse } from 'yaml';
import { kubeConfigFor, sandbox, uniqueName, waitFor } from '../e2e/support.js';
import { account, recorded, tally } from './report.js';
import { electedPod, failedWebhookCalls, metricsPort, status, theLeader, withTwoReplicasAnd } from './replicas.js';

/**
 * Pods per batch, created at once (as a ReplicaSet controller does: the apiserver then calls
 * the webhook on several connections, and dials new ones), and the pause between batches.
 */
const BATCH = 8;
const PAUSE_MS = 750;
/** At most this many pods in all, whatever the restarts take. */
const MAX_PODS = Number(process.env.RELIABILITY_ROLLING_MAX_PODS ?? 320);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A rolling restart, as `kubectl rollout restart` of the provider's Deployment does it: each
 * replica in turn gets SIGTERM and the next one only once it is back and Ready, while elected
 * pods keep coming. A terminating replica is not Ready at once (the front, like a Service,
 * stops sending it new connections), hands its lease back, keeps answering for
 * --shutdown-delay-seconds and asks each client to close its connection after its answer;
 * only then does it close. Nothing may fail: no refused pod, no failed webhook call.
 *
 * The sandbox cannot surge (each replica has its own ports), so one replica serves alone while
 * the other restarts; a Deployment with maxSurge 1 keeps two Ready throughout.
 */
describe('two provider replicas: a rolling restart during a stream of elected pods', function () {
  this.timeout(400_000);
  const ns = uniqueName('rollout');
  withTwoReplicasAnd(ns);

  it('every replica restarts in turn, with batches created during each drain; every pod is admitted (0 failed webhook calls) and runs with exactly one delegate; one replica leads at the end', async () => {
    const head = { scenario: 'rolling restart of the replicas', load: `elected pods, ${BATCH} every ${PAUSE_MS} ms`, faults: 'SIGTERM of each of 2 replicas in turn' };
    await recorded(ns, head, async (row) => {
      const firstLeader = await theLeader();
      const failedBefore = failedWebhookCalls().length;

      // The stream: batches of elected pods until the restarts are done.
      const c1 = kubeConfigFor('c1').makeApiClient(CoreV1Api);
      /** Each creation's error, if it failed (a refused admission among them). */
      const created: Promise<string | undefined>[] = [];
      const drainWindows: { replica: number; from: number; to: number }[] = [];
      const createdAt: number[] = [];
      let restarting = true;
      const stream = (async () => {
        for (let b = 0; restarting && created.length < MAX_PODS; b++) {
          createdAt.push(Date.now());
          for (let i = 0; i < BATCH; i++) {
            created.push(
              c1.createNamespacedPod({ namespace: ns, body: parse(electedPod(ns, `roll-${b * BATCH + i}`)) }).then(
                () => undefined,
                (err: { body?: unknown; message?: string }) => (typeof err.body === 'string' ? err.body : (err.message ?? JSON.stringify(err.body))),
              ),
            );
          }
          await new Promise((r) => setTimeout(r, PAUSE_MS));
        }
      })();

      // The standby first, then the leader, as a rollout takes them in no particular order.
      const started = Date.now();
      for (const replica of [1 - firstLeader, firstLeader]) {
        await new Promise((r) => setTimeout(r, 2000));
        const pid = sandbox.killProviderReplica('c1', replica, 'SIGTERM');
        const from = Date.now();
        await waitFor(`replica ${replica} not Ready once terminating`, 5000, async () => (await status(metricsPort(replica), '/readyz')) !== 200);
        await waitFor(`replica ${replica} (pid ${pid}) exits after its drain`, 60_000, async () => !alive(pid));
        const to = Date.now();
        drainWindows.push({ replica, from, to });
        console.log(`    replica ${replica}: drained and exited ${((to - from) / 1000).toFixed(1)} s after SIGTERM`);
        await waitFor(`replica ${replica} Ready again`, 60_000, async () => (await status(metricsPort(replica), '/readyz')) === 200);
      }
      const rolledMs = Date.now() - started;
      restarting = false;
      await stream;
      const results = await Promise.all(created);
      const pods = created.length;

      const leader = await theLeader();
      for (const r of [0, 1]) expect(await status(metricsPort(r), '/readyz'), `replica ${r} Ready after the rollout`).to.equal(200);

      const refused = results.filter((r) => r !== undefined);
      const failed = failedWebhookCalls().slice(failedBefore);
      await waitFor(`${pods} proxies Running, each with exactly one delegate`, 240_000, async () => (await account(ns)).running === pods - refused.length);
      const last = await account(ns);
      row.load = `${pods} ${row.load}`;
      row.outcome = `rolled in ${(rolledMs / 1000).toFixed(1)} s, replica ${leader} leads; failed webhook calls ${failed.length}, creations refused ${refused.length}`;
      Object.assign(row, tally(last, pods - refused.length));
      // The stream ran through each drain, or the scenario proves nothing.
      for (const w of drainWindows) expect(createdAt.filter((t) => t >= w.from && t <= w.to).length, `batches created while replica ${w.replica} drained`).to.be.above(0);
      expect(refused, 'pod creations refused').to.deep.equal([]);
      expect(failed, 'failed webhook calls in the apiserver log').to.deep.equal([]);
      expect(last.lost).to.deep.equal([]);
      expect(last.duplicated).to.deep.equal([]);
      expect(last.orphans).to.deep.equal([]);
    });
  });
});
