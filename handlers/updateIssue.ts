import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { updateIssue } from '../runtime/storage/repositories/issuesRepository';

export default defineHandler('updateIssue', async ({ db, principal, path, body }) => {
  const issue = await updateIssue(db, principal.orgId, path.id, body);
  if (!issue) throw notFound('issue', path.id);
  return { status: 200, body: issue };
});
