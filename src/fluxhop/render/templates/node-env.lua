-- fluxhop: a job's tasks get their own pod's node-local variables.
--
-- A Flux job's environment is its submitter's (rank 0's pod, for the command
-- the entrypoint runs), and every job shell starts with rank 0's broker
-- environment, so a variable that differs from pod to pod (FLUXHOP_NODE_NAME,
-- a rabbit's NNF_NODE_NAME) would reach every task with rank 0's value. Each
-- pod's entrypoint writes its own values to <flux root>/run/node.env. Every
-- job shell sources this file (FLUX_SHELL_RC_PATH, in the job's environment)
-- and puts them in the environment of this node's tasks, over the job's own.
-- The file is found beside the shell's own broker's socket (its FLUX_URI,
-- which the local broker sets: a Flux root moved with FLUXHOP_FLUX_ROOT), or
-- else, in an instance started inside a job, at the pod's Flux root.
local uri = os.getenv ("FLUX_URI") or ""
local run = uri:match ("^local://(.+)/broker/local%-%d+$") or default_run
local file = io.open (run .. "/node.env")
if not file then return end
for line in file:lines () do
    local name, value = line:match ("^([%a_][%w_]*)=(.*)$")
    if name then shell.setenv (name, value) end
end
file:close ()
