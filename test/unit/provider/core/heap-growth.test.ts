import { expect } from 'chai';
import { HEAP_GROWING_PERCENT, limitHeapGrowth } from '../../../../provider/core/heap-growth.js';

describe('limitHeapGrowth', () => {
  const cases: Array<{ name: string; execArgv: string[]; set: string | undefined }> = [
    { name: 'sets the flag on a plain command line', execArgv: [], set: `--heap-growing-percent=${HEAP_GROWING_PERCENT}` },
    { name: 'sets it next to other node flags', execArgv: ['--enable-source-maps', '--max-old-space-size=512'], set: `--heap-growing-percent=${HEAP_GROWING_PERCENT}` },
    { name: "keeps the command line's value", execArgv: ['--heap-growing-percent=50'], set: undefined },
    { name: "keeps the command line's value spelled with underscores", execArgv: ['--heap_growing_percent=50'], set: undefined },
    { name: 'keeps a value given as a separate argument', execArgv: ['--heap-growing-percent', '50'], set: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const calls: string[] = [];
      expect(limitHeapGrowth(c.execArgv, (f) => calls.push(f))).to.equal(c.set);
      expect(calls).to.deep.equal(c.set ? [c.set] : []);
    });
  }
});
