/* Prints docs/parameters.md's table from the one parameter table. */
#include <stdio.h>

#include "base/hier_params.h"

int main(void)
{
    hier_params_print_markdown(stdout);
    return 0;
}
