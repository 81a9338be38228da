import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { autoscalerVerdict, isAutoscalerVerdict } from '../../../../provider/model/autoscaler.js';

const pod: V1Pod = { metadata: { name: 'web-0-x1', namespace: 'apps', uid: 'd1' } };

function ev(reason: string, at: string, o: { name?: string; uid?: string; kind?: string; message?: string } = {}): CoreV1Event {
  return {
    metadata: { name: `${o.name ?? 'web-0-x1'}.${reason}`, namespace: 'apps' },
    involvedObject: { kind: o.kind ?? 'Pod', name: o.name ?? 'web-0-x1', namespace: 'apps', uid: o.uid ?? 'd1' },
    reason,
    message: o.message ?? reason,
    lastTimestamp: new Date(at),
    source: { component: 'cluster-autoscaler' },
  };
}

describe('autoscalerVerdict', () => {
  it('is undefined when cluster-autoscaler said nothing about the pod', () => {
    expect(autoscalerVerdict(pod, [ev('FailedScheduling', '2026-01-01T10:00:00Z')])).to.equal(undefined);
  });

  it('takes the latest of TriggeredScaleUp and NotTriggerScaleUp, by last timestamp', () => {
    const events = [ev('TriggeredScaleUp', '2026-01-01T10:00:10Z', { message: 'pod triggered scale-up: [{g 0->1 (max: 1)}]' }), ev('NotTriggerScaleUp', '2026-01-01T10:00:00Z')];
    expect(autoscalerVerdict(pod, events)).to.deep.equal({ reason: 'TriggeredScaleUp', message: 'pod triggered scale-up: [{g 0->1 (max: 1)}]', atMs: Date.parse('2026-01-01T10:00:10Z') });
    events.push(ev('NotTriggerScaleUp', '2026-01-01T10:00:20Z'));
    expect(autoscalerVerdict(pod, events)?.reason).to.equal('NotTriggerScaleUp');
  });

  it('ignores events about another pod, an earlier pod of the same name, or another kind', () => {
    const events = [
      ev('TriggeredScaleUp', '2026-01-01T10:00:00Z', { name: 'other' }),
      ev('TriggeredScaleUp', '2026-01-01T10:00:00Z', { uid: 'old' }),
      ev('TriggeredScaleUp', '2026-01-01T10:00:00Z', { kind: 'Node' }),
    ];
    expect(autoscalerVerdict(pod, events)).to.equal(undefined);
    expect(events.map(isAutoscalerVerdict)).to.deep.equal([true, true, false]);
  });
});
