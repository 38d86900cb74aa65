-- Argo CD health of an AtlantisDeployment (atlantis-operator.dev), for
-- resource.customizations.health.atlantis-operator.dev_AtlantisDeployment (docs/gitops.md).
-- It reads the conditions the controller writes: Stalled -> Degraded, Ready -> Healthy,
-- Reconciling -> Progressing (Suspended when the rollout is paused), so a rollout is Progressing
-- until its last drain ends and the message names the draining pod and its operations.
-- Argo CD gives scripts no string library: only the base and table functions are used.
local hs = { status = "Progressing", message = "Waiting for the controller to report status" }
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if observed == nil or (generation ~= nil and observed < generation) then
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  return hs
end

local conditions = {}
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    conditions[c.type] = c
  end
end
local function holds(t)
  return conditions[t] ~= nil and conditions[t].status == "True"
end
local function said(t)
  return conditions[t].reason .. ": " .. conditions[t].message
end

if holds("Stalled") then
  return { status = "Degraded", message = said("Stalled") }
end
if holds("Ready") then
  return { status = "Healthy", message = conditions.Ready.message }
end
if holds("Reconciling") then
  if conditions.Reconciling.reason == "RolloutPaused" then
    return { status = "Suspended", message = said("Reconciling") }
  end
  return { status = "Progressing", message = said("Reconciling") }
end

-- A controller from before the kstatus conditions: its Deployment-style ones.
if holds("Degraded") then
  return { status = "Degraded", message = said("Degraded") }
end
if conditions.Progressing ~= nil then
  if conditions.Progressing.status == "True" and conditions.Progressing.reason == "RolloutComplete" then
    return { status = "Healthy", message = conditions.Progressing.message }
  end
  if conditions.Progressing.status == "False" then
    return { status = "Degraded", message = said("Progressing") }
  end
  hs.message = said("Progressing")
end
return hs
