import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { delegatePodName } from '../../../../provider/model/names.js';
import { DELEGATE_EVENT_COPIES } from '../../../../provider/core/config.js';
import { isAutoscalerVerdict, NOT_TRIGGER_SCALE_UP, TRIGGERED_SCALE_UP } from '../../../../provider/model/autoscaler.js';
import { copiesEvent, eventTime, isAboutDelegateOf, proxyEventFor, proxyEventName, ROUTINE_POD_EVENT_REASONS, targetEventsSelector } from '../../../../provider/model/proxy-event.js';
import { proxy as baseProxy, type ProxyFixture } from '../../../support/pods.js';

const delegate = (over: Partial<V1Pod['metadata']> = {}): V1Pod => ({
  metadata: {
    name: 'web-0a1b2c3d4e',
    namespace: 'shop',
    uid: 'delegate-uid',
    labels: { 'multicluster.admiralty.io/parent-cluster-name': 'c1', 'multicluster.admiralty.io/parent-uid': 'proxy-uid' },
    annotations: { 'multicluster.admiralty.io/parent-name': 'web', 'multicluster.admiralty.io/parent-namespace': 'shop' },
    ...over,
  },
});

/** The proxy of {@link delegate}, as the source's cache has it. */
const proxy = (over: ProxyFixture = {}): V1Pod => baseProxy({ name: 'web', namespace: 'shop', uid: 'proxy-uid', ...over });

const event = (over: Partial<CoreV1Event> = {}): CoreV1Event => ({
  metadata: { name: 'web-0a1b2c3d4e.17a', namespace: 'shop', uid: 'event-uid' },
  involvedObject: { kind: 'Pod', name: 'web-0a1b2c3d4e', namespace: 'shop', uid: 'delegate-uid', fieldPath: 'spec.containers{app}' },
  type: 'Warning',
  reason: 'BackOff',
  message: 'Back-off restarting failed container',
  count: 4,
  firstTimestamp: new Date('2026-11-22T10:00:00Z'),
  lastTimestamp: new Date('2026-11-22T10:05:00Z'),
  ...over,
});

describe('proxy events (copies of delegate events)', () => {
  it('copies an event about our delegate onto its proxy, saying where it happened', () => {
    const copy = proxyEventFor(event(), delegate(), proxy(), 'c1', 'shop/eu');
    expect(copy).to.deep.equal({
      metadata: {
        name: proxyEventName('web', 'event-uid'),
        namespace: 'shop',
        annotations: { 'multicluster.admiralty.io/mirrored-from': 'shop/eu/shop/web-0a1b2c3d4e.17a' },
      },
      involvedObject: { kind: 'Pod', apiVersion: 'v1', name: 'web', namespace: 'shop', uid: 'proxy-uid', fieldPath: 'spec.containers{app}' },
      type: 'Warning',
      reason: 'BackOff',
      message: '[shop/eu] Back-off restarting failed container',
      count: 4,
      firstTimestamp: new Date('2026-11-22T10:00:00Z'),
      lastTimestamp: new Date('2026-11-22T10:05:00Z'),
      source: { component: 'admiralty', host: 'shop/eu' },
      reportingComponent: 'admiralty',
      reportingInstance: 'shop/eu',
    });
  });

  it('copies nothing that is not about one of this cluster’s delegates', () => {
    expect(proxyEventFor(event(), delegate({ labels: { 'multicluster.admiralty.io/parent-cluster-name': 'other', 'multicluster.admiralty.io/parent-uid': 'x' } }), proxy(), 'c1', 't')).to.equal(
      undefined,
    );
    expect(proxyEventFor(event({ involvedObject: { kind: 'Node', name: 'web-0a1b2c3d4e' } }), delegate(), proxy(), 'c1', 't')).to.equal(undefined);
    expect(proxyEventFor(event({ involvedObject: { kind: 'Pod', name: 'someone-else', namespace: 'shop' } }), delegate(), proxy(), 'c1', 't')).to.equal(undefined);
    // Same name, another pod (the delegate was recreated): the old pod's events are not ours.
    expect(proxyEventFor(event({ involvedObject: { kind: 'Pod', name: 'web-0a1b2c3d4e', namespace: 'shop', uid: 'older-uid' } }), delegate(), proxy(), 'c1', 't')).to.equal(undefined);
    expect(proxyEventFor(event(), delegate({ annotations: {} }), proxy(), 'c1', 't')).to.equal(undefined);
  });

  it("copies nothing to a proxy that the delegate's own word names but is not its proxy", () => {
    // All of the delegate's labels and annotations are the target's word.
    const elsewhere = delegate({ annotations: { 'multicluster.admiralty.io/parent-name': 'coredns', 'multicluster.admiralty.io/parent-namespace': 'kube-system' } });
    expect(proxyEventFor(event(), elsewhere, proxy({ name: 'coredns', namespace: 'kube-system' }), 'c1', 't'), 'another namespace than the delegate’s').to.equal(undefined);
    expect(proxyEventFor(event(), delegate(), undefined, 'c1', 't'), 'no such proxy').to.equal(undefined);
    expect(proxyEventFor(event(), delegate(), proxy({ uid: 'another-uid' }), 'c1', 't'), 'another pod of that name').to.equal(undefined);
    expect(proxyEventFor(event(), delegate(), proxy({ name: 'db' }), 'c1', 't'), 'another proxy').to.equal(undefined);
  });

  it('writes the message and reason as one printable line, and the type as Warning or Normal', () => {
    const copy = proxyEventFor(event({ type: 'Critical', reason: 'Odd\nReason', message: 'line one\n\u202eline two Bearer abc.def' }), delegate(), proxy(), 'c1', 't')!;
    expect(copy.message).to.equal('[t] line one line two Bearer <redacted>');
    expect(copy.reason).to.equal('Odd Reason');
    expect(copy.type).to.equal('Normal');
  });

  it('names copies deterministically, per original event, within the name limits', () => {
    expect(proxyEventName('web', 'a')).to.equal(proxyEventName('web', 'a'));
    expect(proxyEventName('web', 'a')).to.not.equal(proxyEventName('web', 'b'));
    expect(proxyEventName('web', 'a')).to.match(/^web\.[0-9a-f]{10}$/);
    const long = proxyEventName(`${'a'.repeat(199)}.b`, 'u');
    expect(long.length).to.be.at.most(253);
    expect(long).to.not.include('..');
  });

  it('takes the time and count of events written through the newer events API', () => {
    const series = event({
      lastTimestamp: undefined,
      firstTimestamp: undefined,
      count: undefined,
      eventTime: new Date('2026-11-22T09:00:00Z'),
      series: { count: 7, lastObservedTime: new Date('2026-11-22T09:30:00Z') },
    });
    expect(eventTime(series)?.toISOString()).to.equal('2026-11-22T09:30:00.000Z');
    const copy = proxyEventFor(series, delegate(), proxy(), 'c1', 't')!;
    expect(copy.count).to.equal(7);
    expect((copy.lastTimestamp as Date).toISOString()).to.equal('2026-11-22T09:30:00.000Z');
  });

  it('keeps messages within 1024 characters', () => {
    const copy = proxyEventFor(event({ message: 'x'.repeat(5000) }), delegate(), proxy(), 'c1', 't')!;
    expect(copy.message).to.have.length(1024);
    expect(copy.message!.startsWith('[t] xxx')).to.equal(true);
    expect(copy.message!.endsWith('x…')).to.equal(true);
  });
});

describe('copiesEvent', () => {
  it('takes Warnings by default, every event with all, none with none', () => {
    const normal = event({ type: 'Normal', reason: 'Pulled' });
    const untyped = event({ type: undefined });
    expect([event(), normal, untyped].map((ev) => copiesEvent('warnings', ev))).to.deep.equal([true, false, false]);
    expect([event(), normal, untyped].map((ev) => copiesEvent('all', ev))).to.deep.equal([true, true, true]);
    expect([event(), normal, untyped].map((ev) => copiesEvent('none', ev))).to.deep.equal([false, false, false]);
  });
});

describe('targetEventsSelector', () => {
  it('leaves out the routine reasons unless every event is copied', () => {
    const podEvents = 'involvedObject.kind=Pod,reportingComponent!=admiralty';
    const routine = ',reason!=Scheduled,reason!=Pulling,reason!=Pulled,reason!=Created,reason!=Started,reason!=Killing';
    expect(targetEventsSelector('all')).to.equal(podEvents);
    expect(targetEventsSelector('warnings')).to.equal(podEvents + routine);
    expect(targetEventsSelector('none')).to.equal(podEvents + routine);
  });

  /** Whether an event passes a field selector of `k=v` and `k!=v` terms, as the apiserver reads an event's fields. */
  const passes = (selector: string, ev: CoreV1Event): boolean => {
    const fields: Record<string, string> = {
      'involvedObject.kind': ev.involvedObject?.kind ?? '',
      reportingComponent: ev.reportingComponent ?? '',
      reason: ev.reason ?? '',
      type: ev.type ?? '',
    };
    return selector.split(',').every((term) => {
      const [k, v] = term.split(/!?=/);
      expect(fields, `a field the apiserver selects events by: ${k}`).to.have.property(k!);
      return term.includes('!=') ? fields[k!] !== v : fields[k!] === v;
    });
  };

  it('lets through every event the events cache keeps, and none of the routine ones it drops', () => {
    const kept = [
      event(),
      event({ reason: 'FailedScheduling' }),
      event({ reason: 'Failed', message: 'Failed to pull image' }),
      event({ reason: 'Unhealthy' }),
      event({ type: 'Normal', reason: TRIGGERED_SCALE_UP }),
      event({ type: 'Normal', reason: NOT_TRIGGER_SCALE_UP }),
    ];
    const routine = ROUTINE_POD_EVENT_REASONS.map((reason) => event({ type: 'Normal', reason }));
    for (const copies of DELEGATE_EVENT_COPIES) {
      const selector = targetEventsSelector(copies);
      for (const ev of [...kept, ...routine]) {
        if (copiesEvent(copies, ev) || isAutoscalerVerdict(ev)) expect(passes(selector, ev), `${copies}: ${ev.type} ${ev.reason}`).to.equal(true);
      }
      expect(routine.map((ev) => passes(selector, ev))).to.deep.equal(routine.map(() => copies === 'all'));
      expect(passes(selector, event({ reportingComponent: 'admiralty' })), `${copies}: our own copies`).to.equal(false);
    }
  });
});

describe('isAboutDelegateOf', () => {
  const proxy = (name: string, uid: string): V1Pod => baseProxy({ name, namespace: 'shop', uid });
  const longName = `web-${'x'.repeat(70)}`;
  const proxies = [proxy('web', 'u1'), proxy(longName, 'u2'), proxy('web-2', 'u3')];
  const byName = (name: string, namespace: string) => proxies.find((p) => p.metadata!.name === name && p.metadata!.namespace === namespace);
  const inNamespace = (namespace: string) => proxies.filter((p) => p.metadata!.namespace === namespace);
  const about = (name: string, o: { kind?: string; namespace?: string } = {}) =>
    isAboutDelegateOf(event({ involvedObject: { kind: o.kind ?? 'Pod', name, namespace: o.namespace ?? 'shop' } }), 'c1', byName, inNamespace);

  it("is true for an event about a proxy's delegate, its name whole or cut to length", () => {
    expect(about(delegatePodName('web', 'c1', 'u1'))).to.equal(true);
    expect(delegatePodName(longName, 'c1', 'u2').length).to.equal(63);
    expect(about(delegatePodName(longName, 'c1', 'u2'))).to.equal(true);
  });
  it('is false for the pods of the target, of another source, of a proxy gone, or of another namespace', () => {
    expect(about('web')).to.equal(false); // the proxy's own name: a pod of the target
    expect(about('web-7d9c8b6f5d-x2x4z')).to.equal(false); // a Deployment's pod
    expect(about(delegatePodName('web', 'c3', 'u1'))).to.equal(false); // another source's delegate of a same-name proxy
    expect(about(delegatePodName('web', 'c1', 'old-uid'))).to.equal(false); // the delegate of an earlier proxy of that name
    expect(about(delegatePodName('gone', 'c1', 'u9'))).to.equal(false);
    expect(about(delegatePodName('web', 'c1', 'u1'), { namespace: 'other' })).to.equal(false);
    expect(about(delegatePodName(`${longName}z`, 'c1', 'u5'))).to.equal(false); // cut to the same prefix, another pod's hash
  });
  it('is false for an event about another kind with the same name', () => {
    expect(about(delegatePodName('web', 'c1', 'u1'), { kind: 'PersistentVolumeClaim' })).to.equal(false);
  });
});
