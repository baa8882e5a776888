/* rds3's commands, for rds3 itself and for rdcp's s3:// copies. */
#ifndef RDX_S3CMD_H
#define RDX_S3CMD_H

/* Runs "rds3 [OPTIONS] COMMAND ARGS..." (argv[0] is not looked at);
 * messages begin with tool.  Returns the exit status. */
int rds3_run(const char *tool, int argc, char **argv);

#endif
