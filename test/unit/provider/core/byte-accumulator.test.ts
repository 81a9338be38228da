import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ByteAccumulator } from '../../../../provider/core/byte-accumulator.js';

describe('ByteAccumulator', () => {
  it('gives back every byte in order, whatever the sizes of the pieces, and is then empty', () => {
    const sizes = [1, 0, 3, 5000, 1, 64 * 1024, 70_000, 2, 4095, 4096, 100, 65_535, 1];
    const pieces = sizes.map((n) => randomBytes(n));
    const acc = new ByteAccumulator();
    for (const p of pieces) acc.push(p);
    expect(acc.length).to.equal(sizes.reduce((a, b) => a + b, 0));
    expect(acc.take().equals(Buffer.concat(pieces))).to.equal(true);
    expect(acc.length).to.equal(0);
    acc.push(Buffer.from('again'));
    expect(acc.take().toString()).to.equal('again');
  });

  it('hands back a lone piece as it came, with no copy', () => {
    const acc = new ByteAccumulator();
    const piece = Buffer.from('{"kind":"Status"}');
    acc.push(piece);
    expect(acc.take()).to.equal(piece);
  });
});
