/* rds3: an S3 client for scripts (the commands are in s3cmd.c). */
#include "cmd/s3cmd.h"

int main(int argc, char **argv)
{
	return rds3_run("rds3", argc, argv);
}
