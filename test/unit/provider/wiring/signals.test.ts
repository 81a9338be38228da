import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { firstSignal } from '../../../../provider/wiring/signals.js';

describe('firstSignal', () => {
  it('resolves with the first signal and passes every later one to ignored, keeping a listener on each', async () => {
    const source = new EventEmitter();
    const ignored: string[] = [];
    const first = firstSignal(source, ['SIGTERM', 'SIGINT'], (s) => ignored.push(s));
    source.emit('SIGTERM');
    source.emit('SIGINT');
    source.emit('SIGTERM');
    expect(await first).to.equal('SIGTERM');
    expect(ignored).to.deep.equal(['SIGINT', 'SIGTERM']);
    expect(source.listenerCount('SIGTERM')).to.equal(1);
    expect(source.listenerCount('SIGINT')).to.equal(1);
  });
});
