import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { asksClaimTemplates, claimCreationFailure, nominatedFor, preemptingFor, unschedulableVerdict } from '../../../scheduler/delegate-verdict.js';

const unschedulable = (message: string) => ({ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message });
const AWAITING = '0/2 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim "web-x-data".';

function delegate(opts: { message?: string; ephemeral?: boolean; nominated?: string; nodeName?: string } = {}): V1Pod {
  return {
    metadata: { name: 'web-x', namespace: 'default' },
    spec: {
      containers: [{ name: 'c', image: 'busybox' }],
      ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
      ...(opts.ephemeral ? { volumes: [{ name: 'data', ephemeral: { volumeClaimTemplate: { spec: {} } } }] } : {}),
    },
    status: { phase: 'Pending', ...(opts.nominated ? { nominatedNodeName: opts.nominated } : {}), ...(opts.message ? { conditions: [unschedulable(opts.message)] } : {}) },
  };
}

describe('scheduler: delegate verdicts', () => {
  describe('unschedulableVerdict', () => {
    it("is the target's Unschedulable condition", () => {
      expect(unschedulableVerdict(delegate({ message: '0/2 nodes are available: 2 Insufficient cpu.' }))?.message).to.equal('0/2 nodes are available: 2 Insufficient cpu.');
      expect(unschedulableVerdict(delegate())).to.equal(undefined);
      const scheduled = delegate();
      scheduled.status!.conditions = [{ type: 'PodScheduled', status: 'True' }];
      expect(unschedulableVerdict(scheduled)).to.equal(undefined);
      const erred = delegate();
      erred.status!.conditions = [{ type: 'PodScheduled', status: 'False', reason: 'SchedulerError', message: 'running PreBind plugin "VolumeBinding": timed out' }];
      expect(unschedulableVerdict(erred)).to.equal(undefined);
    });

    it("is none while a delegate in its target's PodGroup waits for the gang's other members, and that wait of a delegate in none is a verdict", () => {
      const waiting = 'pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod';
      const member = delegate({ message: waiting });
      (member.spec as { schedulingGroup?: unknown }).schedulingGroup = { podGroupName: 'train-0123456789' };
      expect(unschedulableVerdict(member)).to.equal(undefined);
      expect(unschedulableVerdict(delegate({ message: waiting }))?.message).to.equal(waiting);
    });

    it('is none while a delegate with an ephemeral volume waits for its claim, and the wait of one without is a verdict', () => {
      expect(unschedulableVerdict(delegate({ message: AWAITING, ephemeral: true }))).to.equal(undefined);
      expect(unschedulableVerdict(delegate({ message: AWAITING }))?.message).to.equal(AWAITING);
    });
  });

  describe('nominatedFor', () => {
    it('is the nominated node of a delegate not bound yet, with or without an Unschedulable condition', () => {
      expect(nominatedFor(delegate({ nominated: 'n1' }))).to.equal('n1');
      expect(nominatedFor(delegate())).to.equal(undefined);
      expect(nominatedFor(delegate({ nominated: 'n1', nodeName: 'n1' }))).to.equal(undefined);
      // The target's preemption nominates in the write that says Unschedulable: its victims are being deleted.
      expect(nominatedFor(delegate({ nominated: 'n1', message: '0/2 nodes are available: 2 Insufficient cpu.' }))).to.equal('n1');
      expect(nominatedFor(delegate({ message: '0/2 nodes are available: 2 Insufficient cpu.' }))).to.equal(undefined);
    });
  });

  describe('preemptingFor', () => {
    it('is the nominated node when the nomination comes with an Unschedulable condition, else undefined', () => {
      expect(preemptingFor(delegate({ nominated: 'n1', message: '0/2 nodes are available: 2 Insufficient cpu.' }))).to.equal('n1');
      // A nomination alone is the target binding volumes, not preempting.
      expect(preemptingFor(delegate({ nominated: 'n1' }))).to.equal(undefined);
      expect(preemptingFor(delegate({ message: '0/2 nodes are available: 2 Insufficient cpu.' }))).to.equal(undefined);
      expect(preemptingFor(delegate({ nominated: 'n1', nodeName: 'n1', message: 'x' }))).to.equal(undefined);
    });
  });

  describe('claimCreationFailure', () => {
    const withTemplate = (): V1Pod => ({
      ...delegate(),
      metadata: { name: 'web-x', namespace: 'default', uid: 'd-uid' },
      spec: { containers: [{ name: 'c', image: 'busybox' }], resourceClaims: [{ name: 'gpu', resourceClaimTemplateName: 'gpu' }] },
    });
    const event = (uid: string, reason = 'FailedResourceClaimCreation', type = 'Warning'): CoreV1Event => ({
      metadata: { name: `web-x.${uid}`, namespace: 'default' },
      involvedObject: { kind: 'Pod', name: 'web-x', namespace: 'default', uid },
      reason,
      type,
      message: 'PodResourceClaim gpu: resource claim template "gpu": resourceclaimtemplate.resource.k8s.io "gpu" not found',
    });
    const cache = (events: CoreV1Event[]) => ({ list: (namespace?: string) => events.filter((e) => e.metadata?.namespace === namespace) });

    it("is the resource-claim controller's Warning on this very delegate", () => {
      expect(claimCreationFailure(withTemplate(), cache([event('d-uid')]))).to.match(/^PodResourceClaim gpu: resource claim template "gpu"/);
    });

    it('is none for another pod of that name, another reason, or no cache', () => {
      expect(claimCreationFailure(withTemplate(), cache([event('old-uid'), event('d-uid', 'FailedScheduling'), event('d-uid', 'FailedResourceClaimCreation', 'Normal')]))).to.equal(undefined);
      expect(claimCreationFailure(withTemplate(), undefined)).to.equal(undefined);
    });

    it('is asked of pods with claim templates only', () => {
      expect(asksClaimTemplates(withTemplate())).to.equal(true);
      const named = withTemplate();
      named.spec!.resourceClaims = [{ name: 'gpu', resourceClaimName: 'shared-gpu' }];
      expect(asksClaimTemplates(named)).to.equal(false);
      expect(asksClaimTemplates(delegate())).to.equal(false);
    });
  });
});
