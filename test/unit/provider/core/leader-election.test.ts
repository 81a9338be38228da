import { CoordinationV1Api, KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { withRequestDeadline } from '../../../../provider/clusters/request-deadline.js';
import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { LeaderElector } from '../../../../provider/core/leader-election.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { bareApiError } from '../../../support/api-errors.js';

/** One Lease in memory, with resourceVersion checks as the API server does them. */
class FakeLeases {
  lease?: V1Lease;
  rv = 0;
  failing = false;
  /** Calls never answer (a black-holed connection); each call's abort signal is kept. */
  hung = false;
  signals: AbortSignal[] = [];
  writes = 0;
  reads = 0;
  hang(options: unknown): Promise<never> {
    const signal = (options as { middleware?: Array<{ pre(ctx: unknown): Promise<unknown> }> } | undefined)?.middleware?.[0];
    // The elector's middleware sets its abort signal on the request context: record it.
    if (signal) void signal.pre({ setSignal: (s: AbortSignal) => this.signals.push(s) });
    return new Promise(() => {});
  }
  api = {
    readNamespacedLease: async (_: unknown, options?: unknown) => {
      if (this.hung) return this.hang(options);
      if (this.failing) throw bareApiError(503);
      this.reads++;
      if (!this.lease) throw bareApiError(404);
      return structuredClone(this.lease);
    },
    createNamespacedLease: async ({ body }: { body: V1Lease }) => {
      if (this.failing) throw bareApiError(503);
      if (this.lease) throw bareApiError(409);
      this.writes++;
      this.lease = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++this.rv) } };
      return this.lease;
    },
    replaceNamespacedLease: async ({ body }: { body: V1Lease }) => {
      if (this.failing) throw bareApiError(503);
      if (!this.lease) throw bareApiError(404);
      if (body.metadata?.resourceVersion !== this.lease.metadata?.resourceVersion) throw bareApiError(409);
      this.writes++;
      this.lease = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++this.rv) } };
      return this.lease;
    },
  };
  /** Another replica's write: holder and renew time as it sees them. */
  setHolder(identity: string, renewTimeMs: number): void {
    this.lease = {
      metadata: { name: 'admiralty-provider', namespace: 'admiralty', resourceVersion: String(++this.rv) },
      spec: { holderIdentity: identity, leaseDurationSeconds: 15, renewTime: new Date(renewTimeMs) as never, leaseTransitions: 0 },
    };
  }
}

const settle = async () => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

describe('LeaderElector', () => {
  let clock: FakeClock;
  let leases: FakeLeases;
  let log: string[];

  function elector(identity: string, api: object = leases.api) {
    return new LeaderElector({
      coordination: api as unknown as CoordinationV1Api,
      namespace: 'admiralty',
      name: 'admiralty-provider',
      identity,
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
      clock,
      logger: silentLogger(),
      onStartedLeading: () => log.push(`${identity} started`),
      onStoppedLeading: () => log.push(`${identity} stopped at ${(clock.now() - t0) / 1000}s`),
    });
  }
  let t0 = 0;
  /** Advances the clock in retry-period steps, letting each attempt finish. */
  async function advance(seconds: number): Promise<void> {
    for (let t = 0; t < seconds; t += 1) {
      clock.advance(1000);
      await settle();
    }
  }

  beforeEach(() => {
    clock = new FakeClock(Date.parse('2026-11-22T12:00:00Z'));
    leases = new FakeLeases();
    log = [];
    t0 = clock.now();
  });

  it('creates a missing lease and leads, renewing it every retry period', async () => {
    const a = elector('a');
    await a.run();
    expect(a.isLeader()).to.equal(true);
    expect(log).to.deep.equal(['a started']);
    expect(leases.lease?.spec?.holderIdentity).to.equal('a');
    const writes = leases.writes;
    await advance(6);
    expect(leases.writes - writes).to.equal(3);
    await a.release();
  });

  it('renews as leader by writing the lease its last write returned, and reads it again only when that write conflicts or finds it gone', async () => {
    const holder = () => leases.lease?.spec?.holderIdentity;
    const a = elector('a');
    await a.run();
    const reads = leases.reads;
    const writes = leases.writes;
    await advance(6);
    expect(leases.writes - writes, 'a renewal every retry period').to.equal(3);
    expect(leases.reads, 'no read before a renewal').to.equal(reads);
    // Someone else writes the lease (still held by a): a's next write conflicts, a reads and renews.
    leases.lease = { ...leases.lease!, metadata: { ...leases.lease!.metadata, labels: { edited: 'yes' }, resourceVersion: String(++leases.rv) } };
    await advance(2);
    expect(leases.reads - reads).to.equal(1);
    expect(a.isLeader()).to.equal(true);
    expect(leases.lease?.metadata?.labels, 'the other writer’s change is kept').to.deep.equal({ edited: 'yes' });
    expect(leases.lease?.spec?.renewTime?.getTime()).to.equal(clock.now());
    // The lease is deleted: a reads, finds nothing, and creates it.
    leases.lease = undefined;
    await advance(2);
    expect(a.isLeader()).to.equal(true);
    expect(holder()).to.equal('a');
    // Another replica took it over meanwhile (a had stalled past the lease duration, say): a's write conflicts, a reads and steps down.
    leases.setHolder('b', clock.now());
    await advance(2);
    expect(a.isLeader()).to.equal(false);
    expect(holder()).to.equal('b');
    expect(log).to.deep.equal(['a started', `a stopped at ${(clock.now() - t0) / 1000}s`]);
    await a.release();
  });

  it('leaves a live lease of another replica alone, whatever that replica’s clock says', async () => {
    // The holder's clock runs 10 minutes slow: its renew time looks long expired to us.
    leases.setHolder('b', clock.now() - 600_000);
    const a = elector('a');
    await a.run();
    for (let i = 0; i < 5; i++) {
      await advance(2);
      leases.setHolder('b', clock.now() - 600_000 + i); // b keeps renewing
    }
    expect(a.isLeader()).to.equal(false);
    expect(leases.lease?.spec?.holderIdentity).to.equal('b');
    await a.release();
  });

  it('takes over a lease whose holder stopped renewing, once a lease duration has passed', async () => {
    leases.setHolder('b', clock.now());
    const a = elector('a');
    await a.run();
    await advance(14);
    expect(a.isLeader(), 'not before the lease duration').to.equal(false);
    await advance(4);
    expect(a.isLeader()).to.equal(true);
    expect(leases.lease?.spec).to.include({ holderIdentity: 'a', leaseTransitions: 1 });
    await a.release();
  });

  it('takes over at once a lease released by its holder', async () => {
    const b = elector('b');
    await b.run();
    const a = elector('a');
    await a.run();
    expect(a.isLeader()).to.equal(false);
    await b.release();
    expect(leases.lease?.spec?.holderIdentity).to.equal('');
    await advance(2);
    expect(a.isLeader()).to.equal(true);
    expect(log).to.deep.equal(['b started', 'a started']);
    await a.release();
  });

  it('steps down when it cannot renew within the renew deadline', async () => {
    const a = elector('a');
    await a.run();
    leases.failing = true;
    await advance(8);
    expect(a.isLeader(), 'still within the deadline').to.equal(true);
    await advance(4);
    expect(a.isLeader()).to.equal(false);
    expect(log).to.deep.equal(['a started', 'a stopped at 10s']);
    await a.release();
  });

  it('steps down at its renew deadline when its renewals fail fast, not at the first retry after it', async () => {
    const a = elector('a');
    await a.run();
    // The renewal at t=2 succeeds but answers only at t=3.5: the next attempts are at 5.5, 7.5, 9.5 and 11.5.
    const replace = leases.api.replaceNamespacedLease;
    leases.api.replaceNamespacedLease = (p: { body: V1Lease }) => {
      leases.api.replaceNamespacedLease = replace;
      return new Promise((res, rej) =>
        clock.setTimeout(() => {
          replace(p).then(res, rej);
        }, 1500),
      );
    };
    // Fine steps: each answer is taken at its own time, not at the end of a second.
    const step = async (seconds: number) => {
      for (let i = 0; i < seconds * 10; i++) {
        clock.advance(100);
        await settle();
      }
    };
    await step(4);
    leases.failing = true;
    await step(10);
    // Confirmed by the attempt that started at t=2: the deadline is t=12, whatever the retry period.
    expect(log).to.deep.equal(['a started', 'a stopped at 12s']);
    await a.release();
  });

  it('steps down at its renew deadline when the wall clock is stepped back while a renew call hangs', async () => {
    const stopped: number[] = [];
    const started = clock.monotonicMs();
    const a = new LeaderElector({
      coordination: { ...leases.api, replaceNamespacedLease: (_: unknown, o?: unknown) => leases.hang(o) } as unknown as CoordinationV1Api,
      namespace: 'admiralty',
      name: 'admiralty-provider',
      identity: 'a',
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
      clock,
      logger: silentLogger(),
      onStartedLeading: () => undefined,
      onStoppedLeading: () => stopped.push((clock.monotonicMs() - started) / 1000),
    });
    await a.run(); // created at t=0; the renew at t=2 never answers
    await advance(5);
    clock.stepWallClock(-60_000); // NTP steps this node's clock back a minute
    await advance(10);
    expect(stopped, 'another replica may take over at t=15').to.deep.equal([10]);
    await a.release();
  });

  it('leaves a live lease alone when the wall clock is stepped forward', async () => {
    leases.setHolder('b', clock.now());
    const a = elector('a');
    await a.run(); // a sees b's record at t=0
    await advance(1);
    clock.stepWallClock(60_000);
    await advance(1); // b renewed at t=0: its lease runs until t=15
    expect(a.isLeader()).to.equal(false);
    await a.release();
  });

  it('release stops trying and leaves a lease held by someone else untouched', async () => {
    leases.setHolder('b', clock.now());
    const a = elector('a');
    await a.run();
    await a.release();
    const writes = leases.writes;
    await advance(60);
    expect(leases.writes).to.equal(writes);
    expect(a.isLeader()).to.equal(false);
    expect(clock.pending()).to.equal(0);
  });

  it('steps down at its renew deadline when a renew call hangs, aborts that call, and before another replica takes over', async () => {
    // Only a's connection is black-holed: b reaches the API server.
    let aHung = false;
    const aApi = {
      ...leases.api,
      readNamespacedLease: (p: unknown, o?: unknown) => (aHung ? leases.hang(o) : leases.api.readNamespacedLease(p, o)),
      replaceNamespacedLease: (p: { body: V1Lease }, o?: unknown) => (aHung ? leases.hang(o) : leases.api.replaceNamespacedLease(p)),
    };
    const a = elector('a', aApi);
    await a.run(); // renewed at t=0
    const b = elector('b');
    await b.run();
    await advance(1);
    aHung = true; // the renew at t=2 never answers
    await advance(8);
    expect(a.isLeader(), 'within the renew deadline').to.equal(true);
    await advance(1);
    expect(a.isLeader(), 'the renew deadline passed').to.equal(false);
    expect(log).to.deep.equal(['a started', 'a stopped at 10s']);
    expect(leases.signals.length).to.be.greaterThan(0);
    expect(
      leases.signals.every((s) => s.aborted),
      'the hung calls were aborted',
    ).to.equal(true);
    // b saw the last renewal at t=0 and may take over only after t=15: a stepped down before.
    await advance(4);
    expect(b.isLeader()).to.equal(false);
    await advance(4);
    expect(b.isLeader()).to.equal(true);
    expect(log).to.deep.equal(['a started', 'a stopped at 10s', 'b started']);
    await a.release();
    await b.release();
  });

  it('a candidate whose attempt hangs tries again after the attempt deadline', async () => {
    leases.hung = true;
    const a = elector('a');
    void a.run();
    await advance(9);
    expect(leases.signals.length).to.equal(1);
    await advance(4); // the attempt is cut at 10 s, the next one starts 2 s later
    expect(leases.signals.length).to.equal(2);
    expect(leases.signals[0]!.aborted).to.equal(true);
    leases.hung = false;
    await advance(12);
    expect(a.isLeader()).to.equal(true);
    await a.release();
    expect(clock.pending()).to.equal(0);
  });

  it('a late answer to an aborted renew does not bring back a leader that stepped down', async () => {
    let answer: (() => void) | undefined;
    const a = elector('a');
    await a.run();
    // The leader's renewal is a write of the lease it holds: that write answers late.
    const replace = leases.api.replaceNamespacedLease;
    leases.api.replaceNamespacedLease = (p: { body: V1Lease }) => new Promise((res) => (answer = () => res(replace(p))));
    await advance(11);
    expect(a.isLeader()).to.equal(false);
    leases.api.replaceNamespacedLease = replace;
    answer!(); // the old call finally answers, successfully
    await settle();
    expect(log).to.deep.equal(['a started', 'a stopped at 10s']);
    await a.release();
  });

  it('with the real client, aborts the request of an attempt that passes its deadline (the socket is closed)', async () => {
    // An API server that takes every request and never answers.
    const seen: IncomingMessage[] = [];
    const closed: IncomingMessage[] = [];
    const server: Server = createServer((req) => {
      seen.push(req);
      req.socket.on('close', () => closed.push(req));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        // Plain HTTP on loopback (the client allows it only with skipTLSVerify).
        clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
        users: [{ name: 'u', token: 't' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      // As main does: a per-request deadline far longer than the renew deadline.
      withRequestDeadline(kc, 60_000);
      const a = elector('a', kc.makeApiClient(CoordinationV1Api));
      void a.run();
      for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(seen, 'the read reached the server').to.have.length(1);
      expect(seen[0]!.url).to.match(/\/apis\/coordination.k8s.io\/v1\/namespaces\/admiralty\/leases\/admiralty-provider/);
      clock.advance(10_000); // the attempt's deadline
      for (let i = 0; i < 100 && closed.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(closed, 'the hung request was aborted').to.have.length(1);
      await a.release();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
