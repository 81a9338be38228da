import { Sandbox } from '../sandbox/sandbox.js';
import { settleTeardowns } from './support.js';

/**
 * Root hooks of the end-to-end suite: start the sandbox once per run, or reuse one that is
 * already up, and stop it at the end only if this run started it.
 */
let startedHere = false;

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(40 * 60_000); // a cold build of the control plane happens here on a fresh machine
    const sandbox = new Sandbox();
    if (sandbox.isUp()) {
      console.log('  (reusing the running sandbox)');
      return;
    }
    startedHere = sandbox.state() === undefined;
    // SANDBOX_PROVIDER_REPLICAS=2 runs c1's provider as leader and warm standby (the reliability
    // suite does). Not the e2e default: a few tests read the one provider's ports and pid.
    const providerReplicas = Number(process.env.SANDBOX_PROVIDER_REPLICAS ?? 1);
    // Kubernetes' gang scheduling alpha runs in every cluster (test/e2e/gangs.test.ts needs it);
    // SANDBOX_GANGS=0 turns it off, to run the rest of the suite as on a cluster without it.
    const gangs = process.env.SANDBOX_GANGS !== '0';
    // SANDBOX_KUEUE=1 also runs Kueue in c1 (test/e2e/kueue.test.ts needs it); off by default.
    const kueue = process.env.SANDBOX_KUEUE === '1';
    await sandbox.up({ providerReplicas, gangs, kueue, log: (l) => console.log(`  sandbox: ${l}`) });
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(240_000); // namespace teardowns may still be running (support.ts)
    await settleTeardowns();
    const sandbox = new Sandbox();
    // Least privilege, proven over the whole run: the providers and c1's proxy scheduler ran as
    // their shipped ServiceAccounts with exactly the shipped RBAC and admission policies, c1 acted
    // in c2 with only the Source role's rights, and the apiservers (authorizer or policy) refused
    // none of their requests.
    const state = sandbox.state();
    const clusters = state?.clusters ?? [];
    const users = state ? sandbox.auditedUsers(state) : [];
    // A cluster without its audit log proves nothing: that fails the gate too, rather than
    // passing as if no request had been refused.
    const refused = users.flatMap((user) =>
      clusters.flatMap(
        (c) => sandbox.forbiddenRequests(c, user)?.map((r) => `${user} in ${c}: ${r}`) ?? [`${user} in ${c}: no audit log at ${sandbox.auditLogPath(c)}, so no refusal can be ruled out`],
      ),
    );
    if (startedHere && process.env.KEEP_SANDBOX !== '1') await sandbox.down();
    if (refused.length) throw new Error(`an identity needed more than the shipped RBAC and policies allow; refused:\n  ${[...new Set(refused)].join('\n  ')}`);
  },
};
