"""The audit: rules over what a candidate wrote (static audit of files, its AST
pass and name resolution) and over what it ran (action audit of a replay's
log, shell parsing), the rule file that holds them (policy), and the finding
each fired rule records. Below the verifier and task validation, which both
audit; it imports no other stage."""
