import { defineHandler } from '../runtime/http/handler';
import { createIssue } from '../runtime/domain/issues';

export default defineHandler('createIssue', async ({ db, principal, body }) => {
  const issue = await createIssue(db, principal.orgId, body);
  return { status: 201, body: issue, headers: { Location: `/v1/issues/${issue.id}` } };
});
