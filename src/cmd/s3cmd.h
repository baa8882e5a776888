/* rds3's commands (rdcp's s3:// copies call the S3 library, s3/copy.h). */
#ifndef RDX_S3CMD_H
#define RDX_S3CMD_H

/* Runs "rds3 [OPTIONS] COMMAND ARGS..." (argv[0] is not looked at);
 * messages begin with tool.  Returns the exit status. */
int rds3_run(const char *tool, int argc, char **argv);

#endif
