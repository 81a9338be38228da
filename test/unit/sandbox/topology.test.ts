import { expect } from 'chai';
import { isSource, sourceUser, topologyLinks, type Topology } from '../../sandbox/topology.js';

describe('sandbox topologies', () => {
  const three = ['c1', 'c2', 'c3'];
  const cases: { topology: Topology; clusters: string[]; links: Record<string, string[]> }[] = [
    { topology: 'star', clusters: ['c1', 'c2'], links: { c1: ['c1', 'c2'] } },
    { topology: 'star', clusters: three, links: { c1: three } },
    { topology: 'mesh', clusters: three, links: { c1: three, c2: three, c3: three } },
    { topology: 'hub', clusters: three, links: { c2: ['c1'], c3: ['c1'] } },
    { topology: 'hub', clusters: ['c1', 'c2'], links: { c2: ['c1'] } },
  ];
  for (const { topology, clusters, links } of cases) {
    it(`${topology} over ${clusters.join(', ')}: ${JSON.stringify(links)}`, () => {
      const got = Object.fromEntries(topologyLinks(topology, clusters).sources.map((s) => [s.cluster, s.targets]));
      expect(got).to.deep.equal(links);
      for (const c of clusters) expect(isSource(topology, clusters, c), c).to.equal(c in links);
    });
  }

  it('names the identity of a source in its targets after its Source', () => {
    expect(sourceUser('c2')).to.equal('system:serviceaccount:default:c2');
  });
});
