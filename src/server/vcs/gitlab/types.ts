// What the server reads of GitLab's REST API v4 answers (the fields it uses; GitLab sends more).

export interface GlUser {
  id: number;
  username: string;
}

export interface GlPipelineRef {
  id: number;
  sha?: string;
  status?: string;
}

export interface GlMergeRequest {
  iid: number;
  project_id: number;
  source_project_id: number;
  target_project_id: number;
  state: string;
  author?: GlUser | null;
  sha: string;
  source_branch: string;
  target_branch: string;
  web_url: string;
  labels?: string[];
  draft?: boolean;
  work_in_progress?: boolean;
  blocking_discussions_resolved?: boolean;
  detailed_merge_status?: string;
  /** Before GitLab 15.6 the mergeability (can_be_merged, cannot_be_merged, ...). */
  merge_status?: string;
  /** GitLab Premium before approval rules; null or 0 elsewhere. */
  approvals_before_merge?: number | null;
  /** null while GitLab is still preparing the diff. */
  changes_count?: string | null;
  head_pipeline?: GlPipelineRef | null;
}

export interface GlProject {
  id: number;
  path_with_namespace: string;
  http_url_to_repo: string;
  only_allow_merge_if_pipeline_succeeds?: boolean;
  allow_merge_on_skipped_pipeline?: boolean | null;
}

export interface GlDiff {
  old_path: string;
  new_path: string;
  renamed_file?: boolean;
}

export interface GlNote {
  id: number;
  body: string;
  system?: boolean;
  author?: GlUser | null;
  created_at?: string;
}

export interface GlCommit {
  id: string;
  last_pipeline?: GlPipelineRef | null;
}

/** A commit status (an external job) as GET .../commits/:sha/statuses lists it. */
export interface GlCommitStatus {
  name: string;
  status: string;
  ref?: string | null;
  allow_failure?: boolean;
  description?: string | null;
  target_url?: string | null;
}
