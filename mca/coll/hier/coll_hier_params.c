/* coll_hier_params.c: registers the core's parameter table with the MCA
 * system, one loop, so every default and help text lives in hier_params.c. */
#include "coll_hier.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"

#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"

/* String parameters: the MCA system owns the storage it registers and, in
 * Open MPI 5, frees it at MPI_Finalize while a session may still read it
 * (coll/xhc crashed on that, open-mpi/ompi#13013). It registers these slots
 * instead of hier_params' fields; hier_params gets copies of its own. */
#define MCA_COLL_HIER_MAX_STRINGS 8
static char *mca_coll_hier_mca_strings[MCA_COLL_HIER_MAX_STRINGS];
static char *mca_coll_hier_own_strings[MCA_COLL_HIER_MAX_STRINGS];
static size_t mca_coll_hier_string_offsets[MCA_COLL_HIER_MAX_STRINGS];
static int mca_coll_hier_nstrings;

/* One enumerator per algorithm parameter: only the values it accepts. */
static int mca_coll_hier_algo_enum(const hier_param_desc_t *d, mca_base_var_enum_t **enum_p)
{
    mca_base_var_enum_value_t values[HIER_ALGO_COUNT + 1];
    int n = 0;
    char name[64];

    for (int a = 0; a < HIER_ALGO_COUNT; a++)
        if (d->algo_mask & (1u << a)) values[n++] = (mca_base_var_enum_value_t){a, hier_algo_name(a)};
    values[n] = (mca_base_var_enum_value_t){0, NULL};
    snprintf(name, sizeof(name), "coll_hier_%s", d->name);
    return mca_base_var_enum_create(name, values, enum_p);
}

int mca_coll_hier_register_params(void)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);

    hier_params_defaults(&hier_params);
    mca_coll_hier_nstrings = 0;
    for (size_t i = 0; i < n; i++) {
        void *storage = (char *)&hier_params + t[i].offset;
        mca_base_var_enum_t *en = NULL;
        mca_base_var_type_t type = MCA_BASE_VAR_TYPE_INT;
        int rc;

        switch (t[i].type) {
        case HIER_PARAM_INT: type = MCA_BASE_VAR_TYPE_INT; break;
        case HIER_PARAM_SIZE: type = MCA_BASE_VAR_TYPE_SIZE_T; break;
        case HIER_PARAM_STRING:
            if (mca_coll_hier_nstrings == MCA_COLL_HIER_MAX_STRINGS) return OMPI_ERR_OUT_OF_RESOURCE;
            type = MCA_BASE_VAR_TYPE_STRING;
            mca_coll_hier_string_offsets[mca_coll_hier_nstrings] = t[i].offset;
            storage = &mca_coll_hier_mca_strings[mca_coll_hier_nstrings++];
            break;
        case HIER_PARAM_ALGO:
            rc = mca_coll_hier_algo_enum(&t[i], &en);
            if (OPAL_SUCCESS != rc) return rc;
            break;
        }
        rc = mca_base_component_var_register(&mca_coll_hier_component.collm_version, t[i].name, t[i].help, type,
                                             en, 0, 0, OPAL_INFO_LVL_1 + t[i].level - 1, MCA_BASE_VAR_SCOPE_READONLY,
                                             storage);
        if (en) OBJ_RELEASE(en);
        if (rc < 0) return rc;
    }
    return OMPI_SUCCESS;
}

/* hier_params' strings become copies of what the MCA system holds now. */
int mca_coll_hier_params_take_strings(void)
{
    mca_coll_hier_params_drop_strings();
    for (int i = 0; i < mca_coll_hier_nstrings; i++) {
        const char *v = mca_coll_hier_mca_strings[i] ? mca_coll_hier_mca_strings[i] : "";
        if (!(mca_coll_hier_own_strings[i] = strdup(v))) return OMPI_ERR_OUT_OF_RESOURCE;
        *(char **)((char *)&hier_params + mca_coll_hier_string_offsets[i]) = mca_coll_hier_own_strings[i];
    }
    return OMPI_SUCCESS;
}

void mca_coll_hier_params_drop_strings(void)
{
    for (int i = 0; i < mca_coll_hier_nstrings; i++) {
        *(char **)((char *)&hier_params + mca_coll_hier_string_offsets[i]) = "";
        free(mca_coll_hier_own_strings[i]);
        mca_coll_hier_own_strings[i] = NULL;
    }
}
