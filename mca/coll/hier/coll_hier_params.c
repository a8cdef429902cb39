/* coll_hier_params.c: registers the core's parameter table with the MCA
 * system, one loop, so every default and help text lives in hier_params.c. */
#include "coll_hier.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"

#include "base/hier_params.h"

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
    for (size_t i = 0; i < n; i++) {
        void *storage = (char *)&hier_params + t[i].offset;
        mca_base_var_enum_t *en = NULL;
        mca_base_var_type_t type = MCA_BASE_VAR_TYPE_INT;
        int rc;

        switch (t[i].type) {
        case HIER_PARAM_INT: type = MCA_BASE_VAR_TYPE_INT; break;
        case HIER_PARAM_SIZE: type = MCA_BASE_VAR_TYPE_SIZE_T; break;
        case HIER_PARAM_STRING: type = MCA_BASE_VAR_TYPE_STRING; break;
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
