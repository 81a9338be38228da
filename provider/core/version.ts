/** Version reported in virtual nodes' nodeInfo. */
export const PROVIDER_VERSION = 'v0.1.0-admiralty-ts';

/**
 * The User-Agent of the provider's API calls. kube-apiserver names the field manager of a write
 * after what comes before its first `/` (`admiralty-ts`), so the fields the provider writes on
 * delegates and proxies say who wrote them, and audit logs tell its calls apart.
 */
export const USER_AGENT = `admiralty-ts/${PROVIDER_VERSION} (${process.platform}/${process.arch})`;
