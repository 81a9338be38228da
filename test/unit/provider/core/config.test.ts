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
    expect(configOf().workers).to.equal(48);
    expect(configOf().workersPerTarget).to.equal(47);
    expect(configOf('--workers=4').workersPerTarget).to.equal(3);
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

describe('parseConfig: --target-cache-budget-mib', () => {
  it('gives each target 128 MiB by default, and takes a whole number of MiB', () => {
    expect(configOf().targetCacheBudgetMib).to.equal(128);
    expect(configOf('--target-cache-budget-mib=1').targetCacheBudgetMib).to.equal(1);
  });

  it('refuses a budget no delegate fits in, or one that is not a whole number, saying why', () => {
    const zero = parse('--target-cache-budget-mib=0');
    expect(!zero.ok && zero.errors).to.deep.equal(["--target-cache-budget-mib: must be at least 1 (a target's delegates must fit)"]);
    const half = parse('--target-cache-budget-mib=0.5');
    expect(!half.ok && half.errors[0]).to.match(/--target-cache-budget-mib.*"0\.5" is not a whole number/);
  });
});

describe('parseConfig: --summary-renew-interval-seconds', () => {
  it('renews the summary every 30 s by default, and takes 1 to 3600', () => {
    expect(configOf().summaryRenewIntervalSeconds).to.equal(30);
    expect(configOf('--summary-renew-interval-seconds=1').summaryRenewIntervalSeconds).to.equal(1);
    expect(configOf('--summary-renew-interval-seconds=3600').summaryRenewIntervalSeconds).to.equal(3600);
  });

  it("refuses what the summary's readers would refuse, saying why", () => {
    for (const bad of ['0', '3601']) {
      const r = parse(`--summary-renew-interval-seconds=${bad}`);
      expect(!r.ok && r.errors).to.deep.equal([`--summary-renew-interval-seconds: ${bad} is not from 1 to 3600 (the summary's readers accept no other)`]);
    }
  });
});

describe('parseConfig: --admission-workers and --admission-deadline', () => {
  it('answers reviews in one worker with a 2 s deadline by default, and takes 0 to 16 workers and a Go duration', () => {
    expect(configOf()).to.include({ admissionWorkers: 1, admissionDeadlineMs: 2000 });
    expect(configOf('--admission-workers=0', '--admission-deadline=100ms')).to.include({ admissionWorkers: 0, admissionDeadlineMs: 100 });
    expect(configOf('--admission-workers=16', '--admission-deadline=4s')).to.include({ admissionWorkers: 16, admissionDeadlineMs: 4000 });
  });

  it("refuses more than 16 workers and a deadline outside 100ms to 4s (the apiserver's 5 s), saying why", () => {
    const many = parse('--admission-workers=17');
    expect(!many.ok && many.errors).to.deep.equal(['--admission-workers: 17 is more than 16 (each worker holds up to 256 MiB of heap)']);
    for (const [bad, ms] of [
      ['50ms', 50],
      ['5s', 5000],
    ] as const) {
      const r = parse(`--admission-deadline=${bad}`);
      expect(!r.ok && r.errors).to.deep.equal([`--admission-deadline: ${ms} ms is not from 100ms to 4s (the apiserver gives the webhook 5 s)`]);
    }
  });
});

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

describe('parseConfig: graceful shutdown', () => {
  it("drains 5 s and then stops within 20 s by default: 25 s, under the Deployment's 30 s grace period", () => {
    expect(configOf().shutdownDelaySeconds).to.equal(5);
    expect(configOf().shutdownTimeoutSeconds).to.equal(20);
  });

  it('takes 0 (no drain) and refuses a drain that would only hold a rollout', () => {
    expect(configOf('--shutdown-delay-seconds=0').shutdownDelaySeconds).to.equal(0);
    const r = parse('--shutdown-delay-seconds=301');
    expect(r.ok).to.equal(false);
    expect(!r.ok && r.errors.join('\n')).to.match(/--shutdown-delay-seconds \(301\) must be at most 300/);
  });
});

describe('parseConfig: --replace-unschedulable-after', () => {
  const cases: [string[], number][] = [
    [[], 60_000],
    [['--replace-unschedulable-after=90s'], 90_000],
    [['--replace-unschedulable-after=2m30s'], 150_000],
    [['--replace-unschedulable-after=45'], 45_000],
    [['--replace-unschedulable-after=0'], 0],
  ];
  for (const [argv, ms] of cases) it(`${argv.join(' ') || 'default'}: ${ms} ms`, () => expect(configOf(...argv).replaceUnschedulableAfterMs).to.equal(ms));

  it('refuses what is neither whole seconds nor a Go duration, saying why', () => {
    const r = parse('--replace-unschedulable-after=1d', '--replace-unschedulable-after=-5s');
    expect(!r.ok && r.errors).to.deep.equal(['--replace-unschedulable-after: "-5s" is negative: a delay must be 0 or more']);
    const r2 = parse('--replace-unschedulable-after=soon');
    expect(!r2.ok && r2.errors).to.deep.equal(['--replace-unschedulable-after: "soon" is not a duration like 30s, 2m or 1h30m']);
  });
});

describe('parseConfig: --delegate-events', () => {
  it("copies the delegates' warnings by default, and takes all or none", () => {
    expect(configOf().delegateEvents).to.equal('warnings');
    expect(configOf('--delegate-events=all').delegateEvents).to.equal('all');
    expect(configOf('--delegate-events', 'none').delegateEvents).to.equal('none');
  });

  it('refuses any other value, saying which it takes', () => {
    const r = parse('--delegate-events=normal');
    expect(!r.ok && r.errors).to.deep.equal(['--delegate-events: "normal" is not one of warnings, all, none']);
  });
});
