import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findIssue } from '../runtime/storage/repositories/issuesRepository';

export default defineHandler('getIssue', async ({ db, principal, path }) => {
  const issue = await findIssue(db, principal.orgId, path.id);
  if (!issue) throw notFound('issue', path.id);
  return { status: 200, body: issue };
});
