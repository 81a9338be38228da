import { expect } from 'chai';
import { parseConfig } from '../../../../provider/core/config.js';

describe('parseConfig: leader election timings', () => {
  const parse = (...flags: string[]) => parseConfig(['--cluster-name=c1', ...flags], {});
  const cases: Array<{ flags: string[]; ok: boolean; error?: RegExp }> = [
    { flags: [], ok: true },
    { flags: ['--lease-duration-seconds=15', '--renew-deadline-seconds=14', '--retry-period-seconds=2'], ok: true },
    { flags: ['--lease-duration-seconds=15', '--renew-deadline-seconds=15'], ok: false, error: /renew-deadline-seconds \(15\) must be less than --lease-duration-seconds \(15\)/ },
    { flags: ['--lease-duration-seconds=10', '--renew-deadline-seconds=20'], ok: false, error: /must be less than --lease-duration-seconds/ },
    { flags: ['--renew-deadline-seconds=2', '--retry-period-seconds=2'], ok: false, error: /retry-period-seconds \(2\) must be at least 1 and less than/ },
    { flags: ['--retry-period-seconds=0'], ok: false, error: /retry-period-seconds \(0\)/ },
  ];
  for (const c of cases) {
    it(`${c.flags.join(' ') || 'defaults'}: ${c.ok ? 'accepted' : 'refused'}`, () => {
      const r = parse(...c.flags);
      expect(r.ok).to.equal(c.ok);
      if (!r.ok) expect(r.errors.join('\n')).to.match(c.error!);
    });
  }
});
