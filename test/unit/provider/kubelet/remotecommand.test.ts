import { Readable } from 'node:stream';
import { expect } from 'chai';
import { exitStatus, MAX_RESIZE_LINE_BYTES, parseExecQuery, parseResizeStream } from '../../../../provider/kubelet/remotecommand.js';
import { negotiateProtocol } from '../../../../provider/kubelet/upgrade.js';

const target = { namespace: 'ns', pod: 'p', container: 'c' };

describe('remotecommand helpers', () => {
  it('parses kubelet-side and public flag names', () => {
    const r = parseExecQuery(new URLSearchParams('command=ls&command=-l&input=1&output=1&error=1'), target, 'exec');
    expect(r).to.deep.include({ command: ['ls', '-l'], stdin: true, stdout: true, stderr: true, tty: false });
    const p = parseExecQuery(new URLSearchParams('command=ls&stdout=true'), target, 'exec');
    expect(p).to.deep.include({ stdout: true, stdin: false });
  });
  it('rejects exec without streams or command; attach needs no command', () => {
    expect(parseExecQuery(new URLSearchParams('command=ls'), target, 'exec')).to.be.a('string');
    expect(parseExecQuery(new URLSearchParams('output=1'), target, 'exec')).to.be.a('string');
    expect(parseExecQuery(new URLSearchParams('output=1'), target, 'attach')).to.deep.include({ command: [] });
  });
  it('builds exit Statuses (clamped to 0..255)', () => {
    expect(exitStatus(0)).to.deep.equal({ metadata: {}, status: 'Success' });
    expect(exitStatus(300).details?.causes?.[0]).to.deep.equal({ reason: 'ExitCode', message: '255' });
  });
  it('negotiates the first client protocol we support', () => {
    const supported = ['v4.channel.k8s.io', 'v3.channel.k8s.io'];
    expect(negotiateProtocol('v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io', supported)).to.equal('v4.channel.k8s.io');
    expect(negotiateProtocol(['v3.channel.k8s.io', 'v4.channel.k8s.io'], supported)).to.equal('v3.channel.k8s.io');
    expect(negotiateProtocol('channel.k8s.io', supported)).to.equal(undefined);
  });
  it('splits resize JSON lines across chunks and skips garbage', async () => {
    const sizes = [];
    for await (const s of parseResizeStream(Readable.from(['{"Width":1,', '"Height":2}\nnot json\n{"Width":3,"Height":4}']))) sizes.push(s);
    expect(sizes).to.deep.equal([
      { width: 1, height: 2 },
      { width: 3, height: 4 },
    ]);
  });
  it('drops a resize line longer than the limit as it comes, and reads on after its newline', async () => {
    // Valid JSON padded past the limit: unbounded, it was buffered whole and then applied.
    async function* chunks() {
      yield '{"Width":1,"Height":2}';
      for (let i = 0; i < 2048; i++) yield ' '.repeat(1024);
      yield '\n{"Width":3,"Height":4}\n';
    }
    const sizes = [];
    for await (const s of parseResizeStream(chunks())) sizes.push(s);
    expect(sizes).to.deep.equal([{ width: 3, height: 4 }]);
    expect(MAX_RESIZE_LINE_BYTES).to.be.below(2048 * 1024);
  });
});
