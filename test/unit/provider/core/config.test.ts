import { expect } from 'chai';
import { parseConfig, type ProviderConfig } from '../../../../provider/core/config.js';

const parse = (...argv: string[]) => parseConfig(['--cluster-name=c1', ...argv], {});
const configOf = (...argv: string[]): ProviderConfig => {
  const r = parse(...argv);
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.config;
};

describe('parseConfig: workers', () => {
  it('lets one target hold all workers but one by default', () => {
    expect(configOf().workers).to.equal(4);
    expect(configOf().workersPerTarget).to.equal(3);
    expect(configOf('--workers=16').workersPerTarget).to.equal(15);
  });

  it('keeps at least one worker per target, and takes an explicit value as it is', () => {
    expect(configOf('--workers=1').workersPerTarget).to.equal(1);
    expect(configOf('--workers=8', '--workers-per-target=2').workersPerTarget).to.equal(2);
  });

  it('refuses zero workers per target, saying why', () => {
    const r = parse('--workers-per-target=0');
    expect(r.ok).to.equal(false);
    expect(!r.ok && r.errors).to.deep.equal(['--workers-per-target: must be at least 1']);
  });
});
