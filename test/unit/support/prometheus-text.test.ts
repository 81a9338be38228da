import { expect } from 'chai';
import { parsePrometheusText } from '../../support/prometheus-text.js';

describe('parsePrometheusText', () => {
  it('reads a labelled histogram written label set by label set, as prom-client and client_golang write it', () => {
    const body = [
      '# HELP gc_seconds GC time.',
      '# TYPE gc_seconds histogram',
      'gc_seconds_bucket{le="0.1",kind="minor"} 1',
      'gc_seconds_bucket{le="+Inf",kind="minor"} 2',
      'gc_seconds_sum{kind="minor"} 0.3',
      'gc_seconds_count{kind="minor"} 2',
      'gc_seconds_bucket{le="0.1",kind="major"} 0',
      'gc_seconds_bucket{le="+Inf",kind="major"} 1',
      'gc_seconds_sum{kind="major"} 0.5',
      'gc_seconds_count{kind="major"} 1',
      '',
    ].join('\n');
    const { samples } = parsePrometheusText(body);
    expect(samples.filter((s) => s.name === 'gc_seconds_count').map((s) => [s.labels.kind, s.value])).to.deep.equal([
      ['minor', 2],
      ['major', 1],
    ]);
  });

  it('reads a labelled summary written label set by label set', () => {
    const body = ['# TYPE rpc summary', 'rpc{quantile="0.5",m="a"} 1', 'rpc_sum{m="a"} 3', 'rpc_count{m="a"} 2', 'rpc{quantile="0.5",m="b"} 4', 'rpc_sum{m="b"} 4', 'rpc_count{m="b"} 1', ''].join(
      '\n',
    );
    expect(parsePrometheusText(body).samples).to.have.length(6);
  });

  const bad: [string, string[], RegExp][] = [
    ['a family split by another', ['a 1', 'b 1', 'a{x="1"} 2'], /samples of a are not contiguous/],
    ['a histogram split by another family', ['# TYPE h histogram', 'h_bucket{le="+Inf"} 1', 'other 1', 'h_sum 1'], /samples of h are not contiguous/],
    // Without a TYPE line, `_count` is a name of its own, and a gauge's `_count` is not its family's.
    ['an untyped _count split from its name', ['c_count 1', 'c 1', 'c_count{x="1"} 1'], /samples of c_count are not contiguous/],
    ['a TYPE line after the family began', ['# TYPE h histogram', 'h_bucket{le="+Inf"} 1', 'h_sum 1', '# TYPE h histogram'], /second TYPE line/],
    ['a repeated series', ['a{x="1"} 1', 'a{x="1"} 2'], /repeated series/],
  ];
  for (const [name, lines, message] of bad) {
    it(`refuses: ${name}`, () => {
      expect(() => parsePrometheusText(`${lines.join('\n')}\n`)).to.throw(message);
    });
  }
});
