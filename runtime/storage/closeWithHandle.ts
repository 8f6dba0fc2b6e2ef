/**
 * Runs `close` when a Knex handle is destroyed, before its pool closes: for what a storage module
 * opens beside the pool and must not outlive it (storage/committedReads.ts, storage/sharedReads.ts).
 * Knex's destroy() is its client's (the instance's own property is read-only), so it is wrapped
 * there. Call it once per client and purpose; `close` should not throw (the pool closes anyway).
 */
export function closeWithHandle(client: object, close: () => Promise<void>): void {
  const owner = client as { destroy(callback?: unknown): Promise<void> };
  const destroy = owner.destroy.bind(owner);
  owner.destroy = async (callback?: unknown) => {
    try {
      await close();
    } finally {
      await destroy(callback);
    }
  };
}
